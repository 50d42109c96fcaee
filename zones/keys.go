package zones

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// SigningKey is one DNSSEC key of a zone, read from the pair of files
// that BIND's dnssec-keygen and ldns-keygen write: NAME.key holds the
// DNSKEY record, NAME.private the private key (and, from BIND, the key's
// timing: Publish, Activate, Inactive, Delete).
type SigningKey struct {
	// DNSKEY is the public key as published at the apex.
	DNSKEY *dns.DNSKEY
	// Signer is the private key.
	Signer crypto.Signer
	// File is the .key file, for messages.
	File string
	// Publish, Activate, Inactive and Delete are BIND's timing metadata
	// (zero when the file has none: published and active from the start,
	// never retired).
	Publish, Activate, Inactive, Delete time.Time
}

// KSK reports whether the key has the SEP flag (257): it signs the
// DNSKEY RRset; a zone with no other key signs everything with it.
func (k *SigningKey) KSK() bool { return k.DNSKEY.Flags&dns.SEP != 0 }

// Published reports whether the DNSKEY is in the apex's DNSKEY RRset at t.
func (k *SigningKey) Published(t time.Time) bool {
	return (k.Publish.IsZero() || !t.Before(k.Publish)) && (k.Delete.IsZero() || t.Before(k.Delete))
}

// Active reports whether the key signs at t.
func (k *SigningKey) Active(t time.Time) bool {
	return k.Published(t) && (k.Activate.IsZero() || !t.Before(k.Activate)) &&
		(k.Inactive.IsZero() || t.Before(k.Inactive))
}

// Signing algorithms dnsd signs with.
var signingAlgorithms = map[uint8]string{
	dns.ECDSAP256SHA256: "ECDSAP256SHA256 (13)",
	dns.ED25519:         "ED25519 (15)",
}

// ReadKey reads the key pair named by base (the path with or without
// .key or .private) of the zone origin. Errors name the file; warning
// says when the private key's file is open to its group or others.
func ReadKey(origin, base string) (k *SigningKey, warning string, err error) {
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".key"), ".private")
	k = &SigningKey{File: base + ".key"}
	if k.DNSKEY, err = readDNSKEY(origin, k.File); err != nil {
		return nil, "", err
	}
	priv := base + ".private"
	text, warning, err := yamlconf.ReadSecretFile(priv, priv)
	if err != nil {
		return nil, "", err
	}
	if err := k.readPrivate(priv, []byte(text)); err != nil {
		return nil, "", err
	}
	return k, warning, nil
}

// readPrivate reads the private key file priv, data, of k's DNSKEY.
func (k *SigningKey) readPrivate(priv string, data []byte) error {
	pk, err := k.DNSKEY.ReadPrivateKey(bytes.NewReader(data), priv)
	if err != nil {
		return fmt.Errorf("%s: %v", priv, err)
	}
	signer, ok := pk.(crypto.Signer)
	if !ok {
		return fmt.Errorf("%s: not a signing key", priv)
	}
	if err := hasPrivateKey(data, signer); err != nil {
		return fmt.Errorf("%s: %v", priv, err)
	}
	k.Signer = signer
	if err := k.check(); err != nil {
		return fmt.Errorf("%s: %v (is it the private key of %s?)", priv, err, k.File)
	}
	if err := k.readTiming(data); err != nil {
		return fmt.Errorf("%s: %v", priv, err)
	}
	return nil
}

// readDNSKEY reads the one DNSKEY record of file, owned by origin.
func readDNSKEY(origin, file string) (*dns.DNSKEY, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parseDNSKEY(origin, file, data)
}

// parseDNSKEY reads the one DNSKEY record of data, file's contents.
func parseDNSKEY(origin, file string, data []byte) (*dns.DNSKEY, error) {
	zp := dns.NewZoneParser(bytes.NewReader(data), origin, file)
	zp.SetDefaultTTL(DefaultZoneTTL)
	var key *dns.DNSKEY
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		k, isKey := rr.(*dns.DNSKEY)
		if !isKey || key != nil {
			return nil, fmt.Errorf("%s: want exactly one DNSKEY record", file)
		}
		key = k
	}
	if err := zp.Err(); err != nil {
		return nil, err // names file and line
	}
	switch {
	case key == nil:
		return nil, fmt.Errorf("%s: no DNSKEY record", file)
	case dns.CanonicalName(key.Hdr.Name) != dns.CanonicalName(origin):
		return nil, fmt.Errorf("%s: the key is for %s, not the zone %s", file, key.Hdr.Name, origin)
	case key.Protocol != 3 || key.Flags&dns.ZONE == 0 || key.Flags&^(dns.ZONE|dns.SEP) != 0:
		return nil, fmt.Errorf("%s: not a zone key (flags %d, protocol %d; want 256 or 257, 3)", file, key.Flags, key.Protocol)
	case signingAlgorithms[key.Algorithm] == "":
		return nil, fmt.Errorf("%s: algorithm %s: dnsd signs with ECDSAP256SHA256 (13) or ED25519 (15)", file, dns.AlgorithmToString[key.Algorithm])
	}
	key.Hdr.Name = dns.CanonicalName(origin)
	return key, nil
}

// hasPrivateKey reports a key file without its PrivateKey field, data,
// and a signer the dns library made of one anyway (an empty Ed25519 key,
// which would panic when it signs).
func hasPrivateKey(data []byte, signer crypto.Signer) error {
	found := false
	for _, line := range strings.Split(string(data), "\n") {
		name, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		found = found || ok && strings.EqualFold(strings.TrimSpace(name), "PrivateKey")
	}
	if key, ok := signer.(ed25519.PrivateKey); !found || ok && len(key) != ed25519.PrivateKeySize {
		return errors.New("no PrivateKey field")
	}
	return nil
}

// check signs a probe RRset with the private key and verifies it with
// the DNSKEY: the two files are one pair.
func (k *SigningKey) check() error {
	probe := []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: k.DNSKEY.Hdr.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 1}, Txt: []string{"probe"}}}
	sig := &dns.RRSIG{Algorithm: k.DNSKEY.Algorithm, KeyTag: k.DNSKEY.KeyTag(), SignerName: k.DNSKEY.Hdr.Name,
		Inception: 1, Expiration: 1<<32 - 1}
	if err := sig.Sign(k.Signer, probe); err != nil {
		return err
	}
	if err := sig.Verify(k.DNSKEY, probe); err != nil {
		return errors.New("the private key does not match the public key")
	}
	return nil
}

// readTiming reads BIND's timing fields of a .private file (as
// dnssec-keygen and dnssec-settime write them, YYYYMMDDHHMMSS in UTC).
func (k *SigningKey) readTiming(data []byte) error {
	fields := map[string]*time.Time{"Publish": &k.Publish, "Activate": &k.Activate, "Inactive": &k.Inactive, "Delete": &k.Delete}
	for i, line := range strings.Split(string(data), "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if p := fields[name]; ok && p != nil {
			t, err := time.Parse("20060102150405", strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("line %d: %s: want YYYYMMDDHHMMSS", i+1, name)
			}
			*p = t
		}
	}
	return nil
}
