// Package testenv holds what the tests of dnsd's packages share: a fake
// mirror serving load reports, the test zone and config, a DNS server on
// 127.0.0.1:0, and small metrics helpers. Tests only.
package testenv

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
)

// Secret is the group secret of Config.
const Secret = "s3cret-for-tests"

// Zone is the zone file of Config's zone example.org.
const Zone = `$ORIGIN example.org.
$TTL 300
@    IN SOA ns1 hostmaster 1 3600 600 604800 60
     IN NS  ns1
ns1  IN A   192.0.2.53
`

// Config is a dnsd config with the zone example.org. (file
// example.org.zone), a state file state.json, fast health checks and one
// group www.example.org. with a static member fra1 (10.0.1.1) probed at
// probeURL ("" for none); the group allows private addresses, so that
// run-time members may be on 10/8 and loopback too.
func Config(probeURL string) string {
	return `
listen: ["127.0.0.1:0"]
state_file: state.json
health: {interval: 40ms, timeout: 30ms, jitter: 5ms, rise: 2, fall: 3, signature_window: 30s}
zones:
  - origin: example.org.
    file: example.org.zone
groups:
  - name: www.example.org.
    secret: ` + Secret + `
    allow_private: true
    answers: 4
    members:
      - {name: fra1, host: fra1.example.org., addresses: [10.0.1.1], capacity: 1000, probe: "` + probeURL + `"}
`
}

// FakeMirror serves a load report at /v1/load until told to fail.
type FakeMirror struct {
	Group, Member string
	// Failing makes /v1/load answer 503.
	Failing atomic.Bool
	// Hits counts the requests.
	Hits atomic.Int64
	// BytesPerSecond is the report's bytes per second (0 unless set).
	BytesPerSecond atomic.Int64
	// Top and Rescued are the report's most requested paths and rescued
	// count (none unless set).
	Top     atomic.Pointer[[]probe.PathCount]
	Rescued atomic.Uint64
	// Srv is the server; its URL is the probe's base.
	Srv *httptest.Server
}

// NewFakeMirror starts a FakeMirror for group and member, stopped when the
// test ends.
func NewFakeMirror(t testing.TB, group, member string) *FakeMirror {
	f := &FakeMirror{Group: group, Member: member}
	f.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.Hits.Add(1)
		if f.Failing.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		rep := probe.Report{Group: f.Group, Member: f.Member, Seq: uint64(f.Hits.Load()), Time: time.Now(), R: 1, Load: probe.LoadOf(1, 0),
			BytesPerSecond: float64(f.BytesPerSecond.Load()), Capacity: 1000, Rescued: f.Rescued.Load()}
		if top := f.Top.Load(); top != nil {
			rep.Top = *top
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(rep)
	}))
	t.Cleanup(f.Srv.Close)
	return f
}

// DiscardLogger is a logger that writes nothing.
func DiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Gather gathers reg or fails the test.
func Gather(t testing.TB, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// Server returns a DNS server answering groups with g, its metrics in reg
// (nil: private).
func Server(t testing.TB, reg prometheus.Registerer, g dnsd.GroupAnswerer) *dnsd.Server {
	t.Helper()
	s, err := dnsd.New(dnsd.Options{Logger: DiscardLogger(), Registry: reg, Groups: g})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ServeUDP serves s on a UDP socket of 127.0.0.1:0 until the test ends and
// returns its address.
func ServeUDP(t testing.TB, s *dnsd.Server) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return s.ServeUDP(ctx, pc) })
	t.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return pc.LocalAddr().String()
}
