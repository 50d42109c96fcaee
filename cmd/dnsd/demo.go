package main

import (
	"embed"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"

	"github.com/transmirror/transmirror/scheduler/geo"
)

//go:embed demo
var demoFS embed.FS

// writeDemo copies the embedded demo configuration into dir and returns the
// path of its config file.
func writeDemo(dir string) (string, error) {
	entries, err := demoFS.ReadDir("demo")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		data, err := demoFS.ReadFile("demo/" + e.Name())
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	// The demo's GeoIP database, built from its CSV table: no download.
	csv, err := os.Open(filepath.Join(dir, "regions.csv"))
	if err != nil {
		return "", err
	}
	defer csv.Close()
	rows, err := geo.ReadRows(csv)
	if err != nil {
		return "", err
	}
	out, err := os.Create(filepath.Join(dir, "regions.mmdb"))
	if err != nil {
		return "", err
	}
	if err := geo.WriteMMDB(out, geo.TypeCity, rows); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return filepath.Join(dir, "dnsd.yaml"), nil
}

func printDemo(w io.Writer, dnsAddr string, admin net.Listener) {
	host, port, _ := net.SplitHostPort(dnsAddr)
	dig := fmt.Sprintf("dig @%s -p %s", host, port)
	fmt.Fprintf(w, `
transmirror dnsd demo: serving example.test. on %s (UDP and TCP)

Try:
  %s www.example.test A +subnet=198.51.100.0/24   # EU clients: fra1, ams1
  %s www.example.test A +subnet=203.0.113.0/24    # NA clients: nyc1, bos1
  %s www.example.test A +subnet=192.0.2.0/24      # AS clients: sin1, kul1
  %s www.example.test AAAA +subnet=2001:db8:1::/48
  %s docs.example.test A         # CNAME chain into the group
  %s nope.example.test A         # NXDOMAIN with the SOA
  %s x.sub.example.test A +norec # referral to a delegated child
  %s example.test AXFR           # zone transfer (allowed from loopback)
  %s id.server CH TXT            # server identity
`, dnsAddr, dig, dig, dig, dig, dig, dig, dig, dig, dig)
	if admin != nil {
		fmt.Fprintf(w, "  curl -s http://%s/metrics | grep transmirror_\n", admin.Addr())
		fmt.Fprintf(w, "  bin/groupctl -server http://%s explain www.example.test -client 127.0.0.1 -ecs 192.0.2.0/24\n", admin.Addr())
	}
	fmt.Fprintln(w, "\nCtrl-C stops it.")
}
