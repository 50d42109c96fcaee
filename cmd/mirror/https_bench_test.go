package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/probe/probetest"
)

// BenchmarkHTTPS compares the public HTTPS listener with the plain one on
// one mirror (the same chain and server) serving a 4 KiB file on
// loopback: new connections (one request each; TLS 1.3, a full ECDSA
// P-256 handshake, no resumption) and requests on kept connections
// (HTTP/1.1 and HTTP/2). Client and server share the process, so
// cpu-ns/op, the process's user and system CPU per operation, is both
// ends'; compare the cases as ratios to plain within one run.
func BenchmarkHTTPS(b *testing.B) {
	plain, secure, ca := benchMirror(b)
	newConn := func(tr *http.Transport) *http.Client {
		tr.DisableKeepAlives = true
		return &http.Client{Transport: tr}
	}
	cases := []struct {
		name string
		url  string
		c    *http.Client
	}{
		{"connection/plain", "http://" + plain, newConn(&http.Transport{})},
		{"connection/tls", "https://" + secure, newConn(&http.Transport{TLSClientConfig: benchTLS(ca)})},
		{"request/plain", "http://" + plain, &http.Client{Transport: &http.Transport{}}},
		{"request/tls-h1", "https://" + secure, &http.Client{Transport: &http.Transport{TLSClientConfig: benchTLS(ca)}}},
		{"request/tls-h2", "https://" + secure, &http.Client{Transport: &http.Transport{TLSClientConfig: benchTLS(ca), ForceAttemptHTTP2: true}}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			get := func() {
				resp, err := tc.c.Get(tc.url + "/file")
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != 4096 {
					b.Fatalf("%d bytes, %v", n, err)
				}
				resp.Body.Close()
			}
			get() // a kept connection is open before the clock starts
			cpu := cpuTime()
			b.ResetTimer()
			for range b.N {
				get()
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// benchMirror serves a mirror with a 4 KiB file on a plain and an HTTPS
// listener until b ends and returns their addresses and the CA.
func benchMirror(b *testing.B) (plain, secure string, ca *probetest.CA) {
	dir := b.TempDir()
	ca = probetest.NewCA(b, dir, "ca")
	ca.LeafFor(b, dir, "www", "www.example.test")
	if err := os.MkdirAll(filepath.Join(dir, "root"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "root", "file"), []byte(strings.Repeat("x", 4096)), 0o644); err != nil {
		b.Fatal(err)
	}
	cfg, err := mirror.ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(goodYAML+"redirect: {enabled: false}\n"))
	if err != nil {
		b.Fatal(err)
	}
	m, err := build(cfg, deps{runQueue: func() (float64, error) { return 0, nil }})
	if err != nil {
		b.Fatal(err)
	}
	cs, err := certs.LoadAll([]certs.Files{{CertFile: filepath.Join(dir, "www.crt"), KeyFile: filepath.Join(dir, "www.key")}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	var addrs []string
	for _, conf := range []*tls.Config{nil, certs.NewSet(cs).ServerConfig()} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		if conf != nil {
			ln = tls.NewListener(ln, conf)
		}
		go m.public.Serve(ctx, ln)
	}
	return addrs[0], addrs[1], ca
}

func benchTLS(ca *probetest.CA) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool, ServerName: "www.example.test"}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
