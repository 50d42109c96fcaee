package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/transmirror/transmirror/scheduler/geo"
)

// The demo's fixed addresses: the printed commands name them, so they do
// not change from one run to the next.
const (
	dnsAddr   = "127.0.0.1:5300"
	adminAddr = "127.0.0.1:8053"
	httpPort  = "8080"
	httpsPort = "8443"
	groupName = "www.example.test"
	zoneName  = "example.test"
	// capacity is each site's capacity in load units: load = 10·(r + m),
	// so about 50 requests/s on an idle host.
	capacity = 500
	// nFiles is how many files the content tree has under /pub/.
	nFiles = 200
	// healthPath is the file the front ends check their back ends with.
	healthPath = "/health.txt"
)

// site is one mirror site: a front end on its own loopback address and
// the fixed port, over back ends on neighbouring addresses.
type site struct {
	Name      string // member name, e.g. fra1
	Region    string // continent code of the site and of its clients
	City      string
	Country   string
	Lat, Lon  float64
	IP        string   // the front end's address, port httpPort
	Backends  []string // the back ends' addresses (any port)
	Subnet    string   // a client prefix located in this region
	Subnet6   string   // an IPv6 client prefix located in this region
	Host      string   // the member's own host name
	BackHosts []string // the back ends' host names
}

// demoSites returns the three sites of the demo.
func demoSites() []site {
	sites := []site{
		{Name: "fra1", Region: "EU", City: "Frankfurt", Country: "DE", Lat: 50.11, Lon: 8.68,
			IP: "127.0.1.1", Backends: []string{"127.0.1.11", "127.0.1.12"}, Subnet: "198.51.100.0/24", Subnet6: "2001:db8:1::/48"},
		{Name: "nyc1", Region: "NA", City: "New York", Country: "US", Lat: 40.71, Lon: -74.01,
			IP: "127.0.2.1", Backends: []string{"127.0.2.11", "127.0.2.12"}, Subnet: "203.0.113.0/24", Subnet6: "2001:db8:2::/48"},
		{Name: "sin1", Region: "AS", City: "Singapore", Country: "SG", Lat: 1.35, Lon: 103.82,
			IP: "127.0.3.1", Backends: []string{"127.0.3.11", "127.0.3.12"}, Subnet: "192.0.2.0/24", Subnet6: "2001:db8:3::/48"},
	}
	for i := range sites {
		s := &sites[i]
		s.Host = s.Name + ".mirrors." + zoneName
		for j := range s.Backends {
			s.BackHosts = append(s.BackHosts, fmt.Sprintf("%s-b%d.site.%s", s.Name, j+1, zoneName))
		}
	}
	return sites
}

// backendName is the member name of back end j of s.
func (s site) backendName(j int) string { return fmt.Sprintf("%s-b%d", s.Name, j+1) }

// layout is where the demo keeps its files under its temporary directory.
type layout struct {
	Dir    string // the temporary directory
	Etc    string // configs, zone, GeoIP database, secret
	Logs   string // one log file per process
	Root   string // the content tree served by every back end
	Secret string // the group secret's file
	CA     string // the demo CA's certificate, which curl --cacert trusts
}

func newLayout(dir string) layout {
	return layout{Dir: dir, Etc: filepath.Join(dir, "etc"), Logs: filepath.Join(dir, "logs"),
		Root: filepath.Join(dir, "www"), Secret: filepath.Join(dir, "etc", "secret"), CA: filepath.Join(dir, "etc", "ca.crt")}
}

// writeStatic writes everything that does not depend on a started
// process: directories, the secret, the zone, the GeoIP database, dnsd's
// config, the back ends' configs and the content tree. It returns the
// content's total size.
func writeStatic(l layout, sites []site) (int64, error) {
	for _, d := range []string{l.Etc, l.Logs, l.Root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return 0, err
	}
	if err := writeCerts(l, sites); err != nil {
		return 0, err
	}
	files := map[string]string{
		"secret":            "demo-" + hex.EncodeToString(secret) + "\n",
		"example.test.zone": zoneFile(sites),
		"regions.csv":       regionsCSV(sites),
		"dnsd.yaml":         dnsdConfig(sites),
	}
	for _, s := range sites {
		for j, ip := range s.Backends {
			files[s.backendName(j)+".yaml"] = backendConfig(s, j, ip, l.Root)
		}
	}
	for name, content := range files {
		mode := os.FileMode(0o644)
		if name == "secret" {
			mode = 0o600
		}
		if err := os.WriteFile(filepath.Join(l.Etc, name), []byte(content), mode); err != nil {
			return 0, err
		}
	}
	rows, err := geo.ReadRows(strings.NewReader(files["regions.csv"]))
	if err != nil {
		return 0, fmt.Errorf("regions.csv: %w", err)
	}
	var db bytes.Buffer
	if err := geo.WriteMMDB(&db, geo.TypeCity, rows); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(l.Etc, "regions.mmdb"), db.Bytes(), 0o644); err != nil {
		return 0, err
	}
	return writeContent(l.Root)
}

// zoneFile is the demo zone: SOA, NS and an A record for every host name.
func zoneFile(sites []site) string {
	var b strings.Builder
	fmt.Fprintf(&b, `$ORIGIN %s.
$TTL 300
@   IN SOA ns1 hostmaster 1 3600 600 604800 60
    IN NS  ns1
ns1 IN A   127.0.0.1
; %s. is the group: dnsd answers it from the members, not from this file.
docs    IN CNAME www          ; a CNAME into the group
*.cdn   IN A     127.0.9.9    ; a wildcard
sub     IN NS    ns.sub       ; a delegation, answered as a referral
ns.sub  IN A     127.0.0.53
`, zoneName, groupName)
	for _, s := range sites {
		fmt.Fprintf(&b, "%s. IN A %s\n", s.Host, s.IP)
		for j, h := range s.BackHosts {
			fmt.Fprintf(&b, "%s. IN A %s\n", h, s.Backends[j])
		}
	}
	return b.String()
}

// regionsCSV is the networks table the GeoIP database is made from.
func regionsCSV(sites []site) string {
	var b strings.Builder
	b.WriteString("# The demo's client regions (geo.ReadRows); made into a GeoIP2-City mmdb.\nnetwork,country,continent,lat,lon\n")
	for _, s := range sites {
		for _, n := range []string{s.Subnet, s.Subnet6} {
			fmt.Fprintf(&b, "%s,%s,%s,%.2f,%.2f\n", n, s.Country, s.Region, s.Lat, s.Lon)
		}
	}
	return b.String()
}

func location(s site) string {
	return fmt.Sprintf("{lat: %.2f, lon: %.2f, country: %s, continent: %s}", s.Lat, s.Lon, s.Country, s.Region)
}

// dnsdConfig is dnsd.yaml: the zone and the group of the three front ends.
func dnsdConfig(sites []site) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# tmdemo: one zone, one group of three sites.
listen: [%q]
admin: %s
server: {identity: ns1.demo.transmirror, nsid: demo-ns1}
state_file: state.json
health: {interval: 1s, timeout: 1s, rise: 2, fall: 3}
zones:
  - origin: %s.
    file: example.test.zone
    allow_transfer: [127.0.0.0/8, ::1/128]
geo:
  mmdb: regions.mmdb
  default: {lat: 40.71, lon: -74.01, country: US, continent: NA}
groups:
  - name: %s.
    ttl: {min: 20, max: 60}
    answers: 1
    policy: {name: geo-load}
    secret: {file: secret}
    members:
`, dnsAddr, adminAddr, zoneName, groupName)
	for _, s := range sites {
		fmt.Fprintf(&b, "      - {name: %s, host: %s., addresses: [%s], capacity: %d, location: %s}\n",
			s.Name, s.Host, s.IP, capacity, location(s))
	}
	return b.String()
}

// backendConfig is the config of back end j of s: a mirror serving the
// content tree from its memory cache, with no admin port and no redirects.
func backendConfig(s site, j int, ip, root string) string {
	return fmt.Sprintf(`# tmdemo: back end %d of %s.
listen: [%q]
group: %s
member: %s
host: %s
root: %s
capacity: %d
redirect: {enabled: false}
timeouts: {shutdown: 2s}
site:
  cache: {memory: 64MiB, max_object: 1MiB}
`, j+1, s.Name, net.JoinHostPort(ip, "0"), groupName, s.backendName(j), s.BackHosts[j], quoteYAML(root), capacity)
}

// frontendConfig is the config of s's front end over its started back
// ends (their http://IP:PORT): it pushes its load to dnsd, redirects when
// it is over its watermark, and serves https too, with its certificate
// from the demo CA (writeCerts).
func frontendConfig(s site, backends []string, secretFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# tmdemo: the front end of %s (%s, %s).
listen: [%q]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s
dnsd: {url: "http://%s", secret: {file: %s}, push_interval: 500ms, view_interval: 1s}
capacity: %d
location: %s
redirect: {enabled: true, max_share: 0.5, never: ["/", %q]}
timeouts: {shutdown: 2s}
tls:
  listen: [%q]
  certificates: [{cert_file: %s.crt, key_file: %s.key}]
backends:
`, s.Name, s.City, s.Region, net.JoinHostPort(s.IP, httpPort), groupName, s.Name, s.Host, adminAddr,
		quoteYAML(secretFile), capacity, location(s), healthPath, net.JoinHostPort(s.IP, httpsPort), s.Name, s.Name)
	for j, u := range backends {
		fmt.Fprintf(&b, "  - {name: %s, url: %q, memory: 64MiB}\n", s.backendName(j), u)
	}
	fmt.Fprintf(&b, `site:
  policy: {name: lard}
  health: {path: %s, interval: 1s}
`, healthPath)
	return b.String()
}

// quoteYAML quotes a path for a YAML flow or block value.
func quoteYAML(s string) string { return fmt.Sprintf("%q", s) }

// fileName is the path of content file i (1-based) under the root.
func fileName(i int) string { return fmt.Sprintf("/pub/file-%04d.bin", i) }

// fileSize is the size of content file i: every 20th is 1 MiB, the others
// spread log-uniformly over 4 KiB .. 256 KiB. The same i always has the
// same size.
func fileSize(i int) int64 {
	if i%20 == 0 {
		return 1 << 20
	}
	r := mrand.New(mrand.NewPCG(uint64(i), 0x73697a65))
	return int64(math.Round(4096 * math.Pow(64, r.Float64())))
}

// writeContent writes the content tree: nFiles files of deterministic
// bytes under /pub/ and the health check file. It returns the total size.
func writeContent(root string) (int64, error) {
	pub := filepath.Join(root, "pub")
	if err := os.MkdirAll(pub, 0o755); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(healthPath)), []byte("ok\n"), 0o644); err != nil {
		return 0, err
	}
	var total int64
	for i := 1; i <= nFiles; i++ {
		n := fileSize(i)
		if err := writeFileBytes(filepath.Join(root, filepath.FromSlash(fileName(i))), uint64(i), n); err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// writeFileBytes writes n pseudo-random bytes seeded by seed to path.
func writeFileBytes(path string, seed uint64, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	r := mrand.New(mrand.NewPCG(seed, 0x636f6e74))
	var word [8]byte
	for left := n; left > 0; left -= 8 {
		v := r.Uint64()
		for k := range word {
			word[k] = byte(v >> (8 * k))
		}
		if _, err := w.Write(word[:min(8, left)]); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
