package dispatch

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

var memberOf = map[string]string{
	"10.0.1.1": "fra1", "10.0.1.2": "ams1", "10.0.2.1": "nyc1", "10.0.2.2": "sfo1", "10.0.3.1": "sin1", "10.0.3.2": "tyo1",
}

// resolverAt returns the i-th test resolver; its scope is 10.1.i.0/24.
func resolverAt(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, byte(i), 1}) }

// calibrated runs a dispatcher for d with 20 resolvers behind it (the
// first with 200 requests per second, 19 with 10.5) that ask again when
// their answer expires, and members that report their group requests
// every second over a 10 s window.
func calibrated(t *testing.T, set *zones.Set, d time.Duration) (*Dispatcher, *time.Time) {
	t.Helper()
	ds, now := calibratedSet(t, set, d, 1, false)
	return ds[0], now
}

// calibratedSet is calibrated on an NS set of n dispatchers, resolver i
// asking node i mod n and every node getting every report; with share,
// each node tells the others after every second what its scopes explain
// (LocalExplained → SetRemoteExplained), as the cluster store does.
func calibratedSet(t *testing.T, set *zones.Set, d time.Duration, n int, share bool) ([]*Dispatcher, *time.Time) {
	t.Helper()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ds := make([]*Dispatcher, n)
	for k := range ds {
		disp, err := New(Options{Registry: prometheus.NewRegistry(), Now: func() time.Time { return now }, Seed: 3 + uint64(k)})
		if err != nil {
			t.Fatal(err)
		}
		if err := disp.Load(set); err != nil {
			t.Fatal(err)
		}
		ds[k] = disp
	}
	rates := make([]float64, 20)
	rates[0] = 200
	for i := 1; i < 20; i++ {
		rates[i] = 200.0 / 19
	}
	on := make([]string, 20)
	expires := make([]time.Time, 20)
	hist := map[string]*[10]float64{} // requests per second, by member, last 10 s
	for _, m := range memberOf {
		hist[m] = new([10]float64)
	}
	end := now.Add(d)
	for sec := 0; now.Before(end); sec++ {
		for i := range rates {
			if now.Before(expires[i]) {
				continue
			}
			ans, err := ds[i%n].AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolverAt(i)})
			if err != nil {
				t.Fatal(err)
			}
			on[i], expires[i] = memberOf[ans.Addrs[0].String()], now.Add(time.Duration(ans.TTL)*time.Second)
		}
		for _, h := range hist {
			h[sec%10] = 0
		}
		for i, m := range on {
			hist[m][sec%10] += rates[i]
		}
		now = now.Add(time.Second)
		for m, h := range hist {
			var g float64
			for _, x := range h {
				g += x
			}
			g /= 10
			for _, disp := range ds {
				if err := disp.SetHealth("www.example.org", m, Health{State: probe.StateUp, Load: 10 * g, Reported: now,
					Requests: g, GroupRequests: g, Window: 10 * time.Second}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if share {
			shareExplained(t, ds)
		}
	}
	return ds, &now
}

// shareExplained hands every node what each other node's scopes explain.
func shareExplained(t *testing.T, ds []*Dispatcher) {
	t.Helper()
	for k, from := range ds {
		for group, e := range from.LocalExplained() {
			for o, to := range ds {
				if o != k {
					if err := to.SetRemoteExplained(group, fmt.Sprintf("ns%d", k+1), e); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
}

// TestScopesSurviveRestart: the estimates saved by one dispatcher are
// loaded by the next, so the heavy resolver gets its short TTL and a
// light one its long TTL right after a restart, while a resolver never
// seen gets ttl.unseen.
func TestScopesSurviveRestart(t *testing.T) {
	set := dispatchSet(t, "weighted")
	set.Groups["www.example.org."].TTL.Unseen = 120
	d1, now := calibrated(t, set, 20*time.Minute)
	g := d1.groups()["www.example.org."]
	heavy, light := netip.MustParsePrefix("10.1.0.0/24"), netip.MustParsePrefix("10.1.1.0/24")
	t.Logf("after 20 minutes: heavy %.1f requests/s (200), light %.2f (10.53), group %.1f (400), calibration error %.3f",
		g.rates.Rate(heavy, *now), g.rates.Rate(light, *now), g.rates.Total(*now), func() float64 { r, _ := g.rates.CalibrationError(); return r }())
	path := filepath.Join(t.TempDir(), ScopesPath("dnsd-state.json"))
	if err := d1.SaveScopes(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scope estimates file: %d bytes for 20 scopes", fi.Size())

	later := now.Add(time.Minute)
	d2, err := New(Options{Registry: prometheus.NewRegistry(), Now: func() time.Time { return later }, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Load(set); err != nil {
		t.Fatal(err)
	}
	if err := d2.LoadScopes(path); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		client   netip.Addr
		min, max uint32
	}{
		{"heavy-gets-min", resolverAt(0), 20, 20},
		{"light-gets-long", resolverAt(1), 100, 300},
		{"unseen-gets-unseen", resolverAt(200), 120, 120},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ans, err := d2.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: tc.client})
			if err != nil {
				t.Fatal(err)
			}
			if ans.TTL < tc.min || ans.TTL > tc.max {
				t.Errorf("TTL after restart = %d, want %d..%d", ans.TTL, tc.min, tc.max)
			}
		})
	}
	e, err := d2.Explain("www.example.org", dns.TypeA, resolverAt(0), netip.Prefix{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Why, "calibrated from the members' group requests") {
		t.Errorf("explanation %q does not say the TTL is calibrated", e.Why)
	}
}

// TestLoadScopesBad: a missing file is no error; a corrupt, unknown or
// future-version file is an error that loads nothing and breaks nothing.
func TestLoadScopesBad(t *testing.T) {
	cases := []struct {
		name    string
		content string // "" : no file
		wantErr string
	}{
		{"missing", "", ""},
		{"corrupt", `{"version": 1, "groups": {`, "corrupt"},
		{"unknown-field", `{"version": 1, "groups": {}, "extra": 1}`, "corrupt"},
		{"version", `{"version": 99, "groups": {}}`, "version 99"},
		{"garbage-values", `{"version": 1, "groups": {"www.example.org.": {"total": -5, "scopes": [{"prefix": "10.1.0.0/24", "rate": -1, "copies": 1, "seen": "2026-11-30T12:00:00Z"}]}}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newTestDispatcher(t, "geo-load", func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) })
			path := filepath.Join(t.TempDir(), "dnsd-state.scopes.json")
			if tc.content != "" {
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := d.LoadScopes(path)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("LoadScopes = %v, want %q", err, tc.wantErr)
			}
			if n := d.groups()["www.example.org."].rates.Len(); n != 0 {
				t.Errorf("%d scopes loaded, want 0", n)
			}
			if _, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver}); err != nil {
				t.Errorf("AnswerGroup after a bad file: %v", err)
			}
		})
	}
}

// TestRunScopeSaver: the saver writes when its context ends, and writes
// nothing without a state file.
func TestRunScopeSaver(t *testing.T) {
	cases := []struct {
		name  string
		path  func(dir string) string
		files int
	}{
		{"writes-at-shutdown", func(dir string) string { return filepath.Join(dir, "s.scopes.json") }, 1},
		{"no-state-file", func(string) string { return "" }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := newTestDispatcher(t, "geo-load", time.Now)
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := d.RunScopeSaver(ctx, func() string { return tc.path(dir) }, time.Hour); err != nil {
				t.Fatal(err)
			}
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != tc.files {
				t.Errorf("%d files written, want %d", len(ents), tc.files)
			}
		})
	}
}

func TestScopesPath(t *testing.T) {
	cases := []struct{ name, state, want string }{
		{"none", "", ""},
		{"json", filepath.Join("var", "dnsd-state.json"), filepath.Join("var", "dnsd-state.scopes.json")},
		{"no-extension", filepath.Join("var", "state"), filepath.Join("var", "state.scopes.json")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ScopesPath(tc.state); got != tc.want {
				t.Errorf("ScopesPath(%q) = %q, want %q", tc.state, got, tc.want)
			}
		})
	}
}

// TestScopeMetrics: the scope metrics are exported by group, pass promlint
// and carry no client address.
func TestScopeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	d, err := New(Options{Registry: reg, Now: func() time.Time { return now }, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Load(dispatchSet(t, "weighted")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolverAt(i)}); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(5 * time.Second)
	for _, m := range memberOf {
		if err := d.SetHealth("www.example.org", m, Health{State: probe.StateUp, Reported: now, Requests: 10, GroupRequests: 10}); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP transmirror_dnsd_scope_rate_estimates Client scopes (resolvers, ECS subnets) whose request rate the group remembers.
# TYPE transmirror_dnsd_scope_rate_estimates gauge
transmirror_dnsd_scope_rate_estimates{group="www.example.org."} 3
# HELP transmirror_dnsd_group_estimated_requests_per_second The group's request rate as the adaptive TTL sees it: the members' reported group requests, or their requests from older mirrors.
# TYPE transmirror_dnsd_group_estimated_requests_per_second gauge
transmirror_dnsd_group_estimated_requests_per_second{group="www.example.org."} 60
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "transmirror_dnsd_scope_rate_estimates", "transmirror_dnsd_group_estimated_requests_per_second"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "transmirror_dnsd_scope_calibration_error_ratio"); err != nil || n != 1 {
		t.Errorf("calibration error series: %d (%v), want 1", n, err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}
