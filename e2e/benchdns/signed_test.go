package benchdns

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The signed mixes: dnsd signs the zone online with a KSK and a ZSK
// (ECDSAP256SHA256) made here in BIND's file format; its peer is Knot
// with mod-onlinesign (Knot's own ECDSAP256SHA256 key, which it makes),
// since gdnsd signs nothing. Knot serves the group name as static
// records: it is the cost of signing that is compared.

// writeSigningKeys writes a KSK and a ZSK of origin into dir as
// dnssec-keygen names and writes them, and returns their base names.
func writeSigningKeys(dir string) ([]string, error) {
	var names []string
	for _, flags := range []uint16{257, 256} {
		k := &dns.DNSKEY{Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600},
			Flags: flags, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
		priv, err := k.Generate(256)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("K%s+013+%05d", origin, k.KeyTag())
		if err := os.WriteFile(filepath.Join(dir, name+".key"), []byte(k.String()+"\n"), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, name+".private"), []byte(k.PrivateKeyString(priv)), 0o600); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

// startKnot starts knotd in the foreground on a free loopback port with
// one UDP worker, serving the zone with mod-onlinesign.
func startKnot(b *testing.B, bin, dir string) *server {
	b.Helper()
	port, err := freePort()
	if err != nil {
		b.Fatal(err)
	}
	addr := "127.0.0.1@" + strconv.Itoa(port)
	cfg := fmt.Sprintf(`server:
    rundir: %[1]q
    listen: %[2]s
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: %[1]q
log:
  - target: stderr
    any: warning
policy:
  - id: online
    algorithm: ecdsap256sha256
    single-type-signing: on
mod-onlinesign:
  - id: sign
    policy: online
template:
  - id: default
    storage: %[1]q
    file: "%%s.zone"
    journal-content: none
    zonefile-sync: -1
zone:
  - domain: %[3]s
    module: mod-onlinesign/sign
`, dir, addr, origin)
	if err := os.WriteFile(filepath.Join(dir, "knot.conf"), []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	zone := "$ORIGIN " + origin + "\n" + zoneBody
	for _, m := range members {
		zone += fmt.Sprintf("www %d IN A %s\n", groupTTL, m.v4)
	}
	if err := os.WriteFile(filepath.Join(dir, origin+"zone"), []byte(zone), 0o644); err != nil {
		b.Fatal(err)
	}
	s := startProcess(b, "knot", filepath.Join(dir, "knot.log"), nil, bin, "-c", filepath.Join(dir, "knot.conf"))
	s.addr = fmt.Sprintf("127.0.0.1:%d", port)
	waitAnswers(b, s, time.Now().Add(30*time.Second))
	return s
}

// checkSigned asks s for the static name with DO and fails unless the
// answer carries its RRSIG.
func checkSigned(b *testing.B, s *server) {
	b.Helper()
	q := new(dns.Msg)
	q.SetQuestion(staticName, dns.TypeA)
	q.SetEdns0(1232, true)
	c := &dns.Client{Timeout: 2 * time.Second}
	r, _, err := c.Exchange(q, s.addr)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 || r.Answer[1].Header().Rrtype != dns.TypeRRSIG {
		b.Fatalf("%s: the static name with DO: %v %v, want A and its RRSIG", s.name, r, err)
	}
}

// scrape returns the metrics text of the admin listener at admin.
func scrape(b *testing.B, admin string) string {
	b.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}

// cacheHits reads dnsd's signature counters from its metrics.
func cacheHits(b *testing.B, admin string) (signed, hits float64) {
	b.Helper()
	text := scrape(b, admin)
	num := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + ` ([0-9.e+]+)$`).FindStringSubmatch(text)
		if m == nil {
			b.Fatalf("no %s in dnsd's metrics", name)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	return num("transmirror_dnsd_dnssec_signatures_total"), num("transmirror_dnsd_dnssec_cache_hits_total")
}

// signedLine says what signing costs dnsd, per mix against its unsigned
// counterpart, and the signature cache's hit ratio over the run.
func signedLine(rows map[string]*row, signed, hits float64) string {
	var parts []string
	for _, p := range [][2]string{{"e", "a"}, {"f", "c"}} {
		s, u := rows[p[0]+"dnsd"].summary(), rows[p[1]+"dnsd"].summary()
		if u.cpu > 0 {
			parts = append(parts, fmt.Sprintf("%s/%s %.2f×", p[0], p[1], s.cpu/u.cpu))
		}
	}
	ratio := 0.0
	if hits+signed > 0 {
		ratio = hits / (hits + signed)
	}
	return fmt.Sprintf("dnsd's CPU per signed answer against its own unsigned: %s; signature cache: %.0f signatures made, %.0f hits (%.3f%%)\n",
		strings.Join(parts, ", "), signed, hits, 100*ratio)
}
