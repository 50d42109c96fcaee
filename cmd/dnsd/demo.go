package main

import (
	"embed"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
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
	return filepath.Join(dir, "dnsd.yaml"), nil
}

func printDemo(w io.Writer, dnsAddr string, admin net.Listener) {
	host, port, _ := net.SplitHostPort(dnsAddr)
	dig := fmt.Sprintf("dig @%s -p %s", host, port)
	fmt.Fprintf(w, `
transmirror dnsd demo: serving example.test. on %s (UDP and TCP)

Try:
  %s www.example.test A          # the mirror group
  %s www.example.test AAAA
  %s docs.example.test A         # CNAME chain into the group
  %s nope.example.test A         # NXDOMAIN with the SOA
  %s x.sub.example.test A +norec # referral to a delegated child
  %s example.test AXFR           # zone transfer (allowed from loopback)
  %s id.server CH TXT            # server identity
`, dnsAddr, dig, dig, dig, dig, dig, dig, dig)
	if admin != nil {
		fmt.Fprintf(w, "  curl -s http://%s/metrics | grep transmirror_\n", admin.Addr())
	}
	fmt.Fprintln(w, "\nCtrl-C stops it.")
}
