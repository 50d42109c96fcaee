package frontend

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/webtest"
)

// BenchmarkProxyPath compares the fast path with httputil.ReverseProxy:
// a 4 KiB file through the front end on kept connections, client, front
// end and back end in this process on loopback, so ns/op and allocs/op
// are of all three together; the difference between the two is the
// front end's. cpu-ns/op is the process's CPU time (user and system) per
// request, the steadier figure on a shared machine (go test -run '^$' -bench ProxyPath -cpu 1 ./mirror/frontend/).
func BenchmarkProxyPath(b *testing.B) {
	file := bytes.Repeat([]byte("0123456789abcdef"), 256)
	mod := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "f.bin", mod, bytes.NewReader(file))
	}))
	defer be.Close()
	for _, tt := range []struct {
		name   string
		noFast bool
	}{{"fast", false}, {"reverseproxy", true}} {
		b.Run(tt.name, func(b *testing.B) {
			h, closer, err := New(Config{Policy: PolicyConfig{Name: "wrr"}, Health: quietHealth},
				weighted(Backend{Name: "b1", URL: be.URL}), Options{Rand: rand.New(rand.NewPCG(1, 2)), NoFastPath: tt.noFast})
			if err != nil {
				b.Fatal(err)
			}
			defer closer.Close()
			base := webtest.Serve(b, h)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			b.ReportAllocs()
			b.SetBytes(int64(len(file)))
			b.SetParallelism(8)
			cpu0 := processCPU(b)
			defer func() { b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := client.Get(base + "/f.bin")
					if err != nil {
						b.Error(err)
						return
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK || n != int64(len(file)) {
						b.Errorf("status %d, %d bytes", resp.StatusCode, n)
						return
					}
				}
			})
		})
	}
}

// processCPU is the process's CPU time so far, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
