package zones

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func keyFile(name string) string { return filepath.Join("testdata", "keys", name) }

// TestReadKey reads the key pairs that BIND's dnssec-keygen (a KSK and a
// ZSK, ECDSAP256SHA256) and ldns-keygen (ED25519) wrote, by their base
// name and by either file's name.
func TestReadKey(t *testing.T) {
	tests := []struct {
		name, base string
		tag        uint16
		alg        uint8
		ksk        bool
		timed      bool // BIND's timing fields
	}{
		{"BIND KSK", "Kexample.org.+013+45830", 45830, dns.ECDSAP256SHA256, true, true},
		{"BIND ZSK", "Kexample.org.+013+54815", 54815, dns.ECDSAP256SHA256, false, true},
		{"ldns ED25519", "Kexample.org.+015+31855", 31855, dns.ED25519, false, false},
		{"by the .key file", "Kexample.org.+013+54815.key", 54815, dns.ECDSAP256SHA256, false, true},
		{"by the .private file", "Kexample.org.+015+31855.private", 31855, dns.ED25519, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, _, err := ReadKey("Example.ORG.", keyFile(tt.base))
			if err != nil {
				t.Fatal(err)
			}
			if got := k.DNSKEY.KeyTag(); got != tt.tag || k.DNSKEY.Algorithm != tt.alg || k.KSK() != tt.ksk {
				t.Errorf("tag %d algorithm %d KSK %v, want %d %d %v", got, k.DNSKEY.Algorithm, k.KSK(), tt.tag, tt.alg, tt.ksk)
			}
			if k.DNSKEY.Hdr.Name != "example.org." || k.DNSKEY.Hdr.Ttl != DefaultZoneTTL {
				t.Errorf("owner %q TTL %d", k.DNSKEY.Hdr.Name, k.DNSKEY.Hdr.Ttl)
			}
			if timed := !k.Publish.IsZero() && !k.Activate.IsZero(); timed != tt.timed {
				t.Errorf("timing read: %v, want %v", timed, tt.timed)
			}
			if !k.Active(time.Now()) {
				t.Error("not active now")
			}
		})
	}
}

func TestReadKeyErrors(t *testing.T) {
	tests := []struct {
		name, origin, base, want string
	}{
		{"missing", "example.org.", "missing", keyFile("missing.key") + ": no such file"},
		{"RSA", "example.org.", "bad/Kexample.org.+008+11331", "algorithm RSASHA256: dnsd signs with ECDSAP256SHA256 (13) or ED25519 (15)"},
		{"pair mismatch", "example.org.", "bad/Kmismatch", keyFile("bad/Kmismatch.private") + ": the private key does not match the public key"},
		{"another zone's", "example.org.", "bad/Kexample.net.+013+54111", "the key is for example.net., not the zone example.org."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ReadKey(tt.origin, keyFile(tt.base))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want it to contain %q", err, tt.want)
			}
		})
	}
	t.Run("private key missing", func(t *testing.T) {
		dir := t.TempDir()
		data, err := os.ReadFile(keyFile("Kexample.org.+013+54815.key"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "K.key"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err = ReadKey("example.org.", filepath.Join(dir, "K"))
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "K.private")) {
			t.Fatalf("err %v, want it to name K.private", err)
		}
	})
}

// TestPrivateKeyFieldMissing: a .private file without its PrivateKey
// field is an error that names the file, for both algorithms (the dns
// library reads it as an empty key, which panicked when it signed).
func TestPrivateKeyFieldMissing(t *testing.T) {
	for _, base := range []string{"Kexample.org.+013+45830", "Kexample.org.+015+31855"} {
		t.Run(base, func(t *testing.T) {
			pub, err := os.ReadFile(keyFile(base + ".key"))
			if err != nil {
				t.Fatal(err)
			}
			key, err := parseDNSKEY("example.org.", base+".key", pub)
			if err != nil {
				t.Fatal(err)
			}
			priv := fmt.Sprintf("Private-key-format: v1.3\nAlgorithm: %d\n", key.Algorithm)
			err = (&SigningKey{DNSKEY: key}).readPrivate("K.private", []byte(priv))
			if err == nil || err.Error() != "K.private: no PrivateKey field" {
				t.Fatalf("err %v, want K.private: no PrivateKey field", err)
			}
		})
	}
}

// TestKeyTiming: BIND's Publish, Activate, Inactive and Delete decide
// whether a key is published and whether it signs.
func TestKeyTiming(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 12, 1, h, 0, 0, 0, time.UTC) }
	k := &SigningKey{Publish: at(2), Activate: at(4), Inactive: at(6), Delete: at(8)}
	for _, tt := range []struct {
		hour              int
		published, active bool
	}{
		{1, false, false}, {2, true, false}, {4, true, true}, {6, true, false}, {8, false, false},
	} {
		if p, a := k.Published(at(tt.hour)), k.Active(at(tt.hour)); p != tt.published || a != tt.active {
			t.Errorf("%02d:00: published %v active %v, want %v %v", tt.hour, p, a, tt.published, tt.active)
		}
	}
	if u := (&SigningKey{}); !u.Published(at(1)) || !u.Active(at(1)) {
		t.Error("a key without timing is not published and active")
	}
}

// TestBuildKeys: the zone publishes its keys' DNSKEY records at the apex.
func TestBuildKeys(t *testing.T) {
	dir := t.TempDir()
	zone := "$ORIGIN example.org.\n@ 3600 IN SOA ns1 h 1 7200 3600 1209600 300\n@ 3600 IN NS ns1\nns1 3600 IN A 192.0.2.1\n"
	if err := os.WriteFile(filepath.Join(dir, "z.zone"), []byte(zone), 0o600); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join("testdata", "keys"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := "zones:\n  - origin: example.org\n    file: z.zone\n    dnssec: {keys: [" + abs + "/Kexample.org.+013+45830, " + abs + "/Kexample.org.+013+54815]}\n"
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	z := set.Zones[0]
	if len(z.Keys) != 2 {
		t.Fatalf("%d keys", len(z.Keys))
	}
	if got := z.RRset("example.org.", dns.TypeDNSKEY); len(got) != 2 {
		t.Fatalf("apex DNSKEY RRset %v", got)
	}
	// CDS and CDNSKEY name the KSK alone.
	cds, cdnskey := z.RRset("example.org.", dns.TypeCDS), z.RRset("example.org.", dns.TypeCDNSKEY)
	if len(cds) != 1 || cds[0].(*dns.CDS).KeyTag != 45830 || cds[0].(*dns.CDS).DigestType != dns.SHA256 || len(cdnskey) != 1 || cdnskey[0].(*dns.CDNSKEY).Flags != 257 {
		t.Errorf("CDS %v, CDNSKEY %v; want the KSK's", cds, cdnskey)
	}
	if z.File == "" || z.RRset("ns1.example.org.", dns.TypeA) == nil {
		t.Errorf("the zone lost its file name or records: %q", z.File)
	}
}

// FuzzKeyFiles: the key parsers return an error or a key for any input,
// and never panic.
func FuzzKeyFiles(f *testing.F) {
	for _, base := range []string{"Kexample.org.+013+45830", "Kexample.org.+015+31855", "bad/Kexample.org.+008+11331"} {
		pub, err := os.ReadFile(keyFile(base + ".key"))
		if err != nil {
			f.Fatal(err)
		}
		priv, err := os.ReadFile(keyFile(base + ".private"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(pub, priv)
	}
	f.Fuzz(func(t *testing.T, pub, priv []byte) {
		key, err := parseDNSKEY("example.org.", "fuzz.key", pub)
		if err != nil {
			return
		}
		k := &SigningKey{DNSKEY: key}
		if err := k.readPrivate("fuzz.private", priv); err == nil && k.Signer == nil {
			t.Fatal("no error and no signer")
		}
	})
}
