package group

import (
	"crypto/tls"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func ptr(f float64) *float64 { return &f }

// testView is a group of five: fra1 (this mirror), ams1 and nyc1 up with
// room, par1 down, lon1 draining. util sets utilizations by name, as the
// reported load of a capacity of 100.
func testView(util map[string]float64) api.GroupView {
	m := func(name, host, state string, lat, lon float64, cont string) api.MemberView {
		return api.MemberView{
			MemberInfo: api.MemberInfo{
				Name: name, Host: host, Capacity: 100,
				Location: api.LocationView{Lat: ptr(lat), Lon: ptr(lon), Continent: cont},
			},
			State: state, Load: 100 * util[name], Reported: t0.Add(-time.Second),
		}
	}
	return api.GroupView{
		Name: "www.example.org.", Policy: "geo-load",
		Watermarks: api.Watermarks{Low: 0.7, High: 0.9},
		Members: []api.MemberView{
			m("fra1", "fra1.mirrors.example.org", "up", 50.11, 8.68, "EU"),
			m("ams1", "ams1.mirrors.example.org.", "up", 52.37, 4.90, "EU"),
			m("nyc1", "nyc1.mirrors.example.org", "unknown", 40.71, -74.0, "NA"),
			m("par1", "par1.mirrors.example.org", "down", 48.86, 2.35, "EU"),
			m("lon1", "lon1.mirrors.example.org", "draining", 51.51, -0.13, "EU"),
		},
	}
}

func snapshot(t *testing.T, v api.GroupView, self string) *GroupSnapshot {
	t.Helper()
	s, err := NewGroupSnapshot(v, self, t0, 15*time.Second, RedirectBooking{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDecide(t *testing.T) {
	europe := func() scheduler.Client {
		return scheduler.Client{Loc: scheduler.Location{Lat: 50.9, Lon: 6.9, HasCoords: true, Continent: "EU"}}
	}
	america := func() scheduler.Client {
		return scheduler.Client{Loc: scheduler.Location{Lat: 42.3, Lon: -71.1, HasCoords: true, Continent: "NA"}}
	}
	size := func(n int64) func() (int64, bool) { return func() (int64, bool) { return n, true } }
	unknownSize := func() (int64, bool) { return 0, false }

	rules := RedirectRules{
		Group: "www.example.org", Host: "fra1.mirrors.example.org", Enabled: true, Law: LawWatermark,
		LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1, MinSize: 1024, Never: []string{"/"},
	}
	disabled := rules
	disabled.Enabled = false
	dispatcher := rules
	dispatcher.Dispatcher, dispatcher.Host = true, "dispatch.example.org"

	fresh := snapshot(t, testView(map[string]float64{"fra1": 2, "ams1": 0.2, "nyc1": 0.1}), "fra1")
	stale := &GroupSnapshot{}
	*stale = *fresh
	stale.Fetched = t0.Add(-16 * time.Second)
	full := snapshot(t, testView(map[string]float64{"fra1": 2, "ams1": 0.95, "nyc1": 0.9}), "fra1")
	onlySelf := snapshot(t, testView(map[string]float64{"fra1": 0.1, "ams1": 1.2, "nyc1": 1.5}), "fra1")
	all := snapshot(t, testView(map[string]float64{"ams1": 0.2, "nyc1": 0.1}), "")
	allFull := snapshot(t, testView(map[string]float64{"fra1": 1, "ams1": 0.95, "nyc1": 1.3}), "")

	get := func(host, path string) RedirectRequest {
		return RedirectRequest{Method: http.MethodGet, Host: host, Path: path, Size: size(1 << 20), Client: europe}
	}
	with := func(r RedirectRequest, f func(*RedirectRequest)) RedirectRequest { f(&r); return r }

	tests := []struct {
		name  string
		rules RedirectRules
		req   RedirectRequest
		u     float64
		snap  *GroupSnapshot
		want  Decision
	}{
		{"group host, overloaded: redirect to the nearest sibling with room", rules, get("www.example.org", "/f.iso"), 2, fresh,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonOverload}},
		{"group host with port, case and trailing dot", rules, get("WWW.Example.ORG.:8080", "/f.iso"), 2, fresh,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonOverload}},
		{"client in America goes to nyc1", rules, with(get("www.example.org", "/f.iso"), func(r *RedirectRequest) { r.Client = america }), 2, fresh,
			Decision{Action: Redirect, Target: "nyc1.mirrors.example.org", Member: "nyc1", Reason: ReasonOverload}},
		{"own host name: always served", rules, get("fra1.mirrors.example.org", "/f.iso"), 5, fresh,
			Decision{Action: Serve, Reason: ReasonOtherHost}},
		{"own host name with port", rules, get("fra1.mirrors.example.org:8080", "/f.iso"), 5, fresh,
			Decision{Action: Serve, Reason: ReasonOtherHost}},
		{"another host: served", rules, get("example.org", "/f.iso"), 5, fresh,
			Decision{Action: Serve, Reason: ReasonOtherHost}},
		{"suffix of the group is another host", rules, get("xwww.example.org", "/f.iso"), 5, fresh,
			Decision{Action: Serve, Reason: ReasonOtherHost}},
		{"POST: served", rules, with(get("www.example.org", "/f.iso"), func(r *RedirectRequest) { r.Method = http.MethodPost }), 5, fresh,
			Decision{Action: Serve, Reason: ReasonMethod}},
		{"HEAD: redirected", rules, with(get("www.example.org", "/f.iso"), func(r *RedirectRequest) { r.Method = http.MethodHead }), 5, fresh,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonOverload}},
		{"never path /", rules, get("www.example.org", "/"), 5, fresh,
			Decision{Action: Serve, Reason: ReasonNever}},
		{"never is an exact match", rules, get("www.example.org", "/index.html"), 5, fresh,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonOverload}},
		{"smaller than min_size", rules, with(get("www.example.org", "/f.iso"), func(r *RedirectRequest) { r.Size = size(1023) }), 5, fresh,
			Decision{Action: Serve, Reason: ReasonSmall}},
		{"exactly min_size", rules, with(get("www.example.org", "/f.iso"), func(r *RedirectRequest) { r.Size = size(1024) }), 5, fresh,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonOverload}},
		{"size unknown (back ends): rule skipped", rules, with(get("www.example.org", "/f.iso"), func(r *RedirectRequest) { r.Size = unknownSize }), 5, fresh,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonOverload}},
		{"no size function: rule skipped", rules, with(get("www.example.org", "/f.iso"), func(r *RedirectRequest) { r.Size = nil }), 5, fresh,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonOverload}},
		{"at the low watermark: served", rules, get("www.example.org", "/f.iso"), 0.7, fresh,
			Decision{Action: Serve, Reason: ReasonBelowWatermark}},
		{"idle: served", rules, get("www.example.org", "/f.iso"), 0, fresh,
			Decision{Action: Serve, Reason: ReasonBelowWatermark}},
		{"disabled", disabled, get("www.example.org", "/f.iso"), 5, fresh,
			Decision{Action: Serve, Reason: ReasonDisabled}},
		{"no view yet", rules, get("www.example.org", "/f.iso"), 5, nil,
			Decision{Action: Serve, Reason: ReasonNoView}},
		{"stale view", rules, get("www.example.org", "/f.iso"), 5, stale,
			Decision{Action: Serve, Reason: ReasonStaleView}},
		{"no sibling below its high watermark", rules, get("www.example.org", "/f.iso"), 5, full,
			Decision{Action: Serve, Reason: ReasonNoSibling}},
		{"self excluded though it alone has room", rules, get("www.example.org", "/f.iso"), 5, onlySelf,
			Decision{Action: Serve, Reason: ReasonNoSibling}},
		{"dispatcher: redirects when idle", dispatcher, get("www.example.org", "/f.iso"), 0, all,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonDispatch}},
		{"dispatcher: may send to fra1, a member", dispatcher, get("www.example.org", "/f.iso"), 0,
			snapshot(t, testView(map[string]float64{"fra1": 0.1, "ams1": 1.2, "nyc1": 1.5}), ""),
			Decision{Action: Redirect, Target: "fra1.mirrors.example.org", Member: "fra1", Reason: ReasonDispatch}},
		{"dispatcher: never paths do not apply", dispatcher, get("www.example.org", "/"), 0, all,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonDispatch}},
		{"dispatcher: small files too", dispatcher, with(get("www.example.org", "/f"), func(r *RedirectRequest) { r.Size = size(1) }), 0, all,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonDispatch}},
		{"dispatcher: everyone full, still the first choice", dispatcher, get("www.example.org", "/f.iso"), 0, allFull,
			Decision{Action: Redirect, Target: "fra1.mirrors.example.org", Member: "fra1", Reason: ReasonDispatch}},
		{"dispatcher: a stale view beats none", dispatcher, get("www.example.org", "/f.iso"), 0, stale,
			Decision{Action: Redirect, Target: "ams1.mirrors.example.org", Member: "ams1", Reason: ReasonDispatch}},
		{"dispatcher: no view", dispatcher, get("www.example.org", "/f.iso"), 0, nil,
			Decision{Action: Refuse, Status: 503, Reason: ReasonNoView}},
		{"dispatcher: no member", dispatcher, get("www.example.org", "/f.iso"), 0,
			snapshot(t, api.GroupView{Name: "www.example.org", Policy: "geo-load"}, ""),
			Decision{Action: Refuse, Status: 503, Reason: ReasonNoSibling}},
		{"dispatcher: POST", dispatcher, with(get("www.example.org", "/f.iso"), func(r *RedirectRequest) { r.Method = http.MethodPost }), 0, all,
			Decision{Action: Refuse, Status: 405, Reason: ReasonMethod}},
		{"dispatcher: own host", dispatcher, get("dispatch.example.org", "/f.iso"), 0, all,
			Decision{Action: Refuse, Status: 404, Reason: ReasonOwnHost}},
		{"dispatcher: other host", dispatcher, get("fra1.mirrors.example.org", "/f.iso"), 0, all,
			Decision{Action: Refuse, Status: 421, Reason: ReasonMisdirected}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			share := func() Share { return Share{P: RedirectShare(tt.rules, tt.u)} }
			got := Decide(tt.rules, tt.req, share, tt.snap, t0, rand.New(rand.NewPCG(1, 2)))
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRedirectShare(t *testing.T) {
	r := RedirectRules{LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 0.5}
	step := RedirectRules{LowWatermark: 0.8, HighWatermark: 0.8, MaxShare: 0.4}
	tests := []struct {
		name  string
		rules RedirectRules
		u     float64
		want  float64
	}{
		{"idle", r, 0, 0},
		{"at low", r, 0.7, 0},
		{"quarter way", r, 0.75, 0.125},
		{"half way", r, 0.8, 0.25},
		{"at high", r, 0.9, 0.5},
		{"far above high: capped", r, 3, 0.5},
		{"NaN: nothing", r, math.NaN(), 0},
		{"step below", step, 0.79, 0},
		{"step at", step, 0.8, 0},
		{"step above", step, 0.81, 0.4},
		{"dispatcher", RedirectRules{Dispatcher: true}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedirectShare(tt.rules, tt.u); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("RedirectShare(%g) = %g, want %g", tt.u, got, tt.want)
			}
		})
	}
}

// TestDecideProgressiveShare draws many decisions with a seeded rand and
// checks that the redirected fraction follows RedirectShare.
func TestDecideProgressiveShare(t *testing.T) {
	rules := RedirectRules{Group: "www.example.org", Enabled: true, Law: LawWatermark, LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 0.5}
	snap := snapshot(t, testView(map[string]float64{"ams1": 0.1, "nyc1": 0.1}), "fra1")
	const n = 20000
	for _, u := range []float64{0.6, 0.75, 0.8, 0.85, 0.9, 1.5} {
		t.Run("u="+time.Duration(u*1000).String(), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(7, uint64(u*1000)))
			redirected := 0
			for range n {
				share := func() Share { return Share{P: RedirectShare(rules, u)} }
				d := Decide(rules, RedirectRequest{Method: "GET", Host: "www.example.org", Path: "/f"}, share, snap, t0, rnd)
				if d.Action == Redirect {
					redirected++
				}
			}
			got, want := float64(redirected)/n, RedirectShare(rules, u)
			if math.Abs(got-want) > 0.015 {
				t.Errorf("redirected %.4f of requests at u=%g, want %.4f", got, u, want)
			}
		})
	}
}

func TestRedirectLocation(t *testing.T) {
	tests := []struct {
		name, target, url, host string
		tls                     bool
		want                    string
	}{
		{"port kept", "ams1.example.org", "/a/b.iso?x=1&y=2", "www.example.org:8080", false, "http://ams1.example.org:8080/a/b.iso?x=1&y=2"},
		{"no port", "ams1.example.org", "/a", "www.example.org", false, "http://ams1.example.org/a"},
		{"default http port dropped", "ams1.example.org", "/a", "www.example.org:80", false, "http://ams1.example.org/a"},
		{"https, default port dropped", "ams1.example.org", "/a", "www.example.org:443", true, "https://ams1.example.org/a"},
		{"https, other port kept", "ams1.example.org", "/a", "www.example.org:8443", true, "https://ams1.example.org:8443/a"},
		{"escaped path kept as sent", "ams1.example.org", "/a%20b/%E2%82%AC.iso", "www.example.org", false, "http://ams1.example.org/a%20b/%E2%82%AC.iso"},
		{"target with its own port", "ams1.example.org:9000", "/a", "www.example.org:8080", false, "http://ams1.example.org:9000/a"},
		{"no query, empty query dropped", "ams1.example.org", "/a?", "www.example.org", false, "http://ams1.example.org/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.url, nil)
			r.Host = tt.host
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			if got := RedirectLocation(r, RequestScheme(SchemeAuto, r.TLS != nil, ""), tt.target); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestRedirectLocationBehindProxies builds the Location as the
// Redirector does (ForwardedOf, RequestScheme, RedirectLocation) for
// requests that came through a TLS terminator, trusted or not.
func TestRedirectLocationBehindProxies(t *testing.T) {
	lb := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:1::/48")}
	tests := []struct {
		name    string
		scheme  string // redirect.scheme
		trusted []netip.Prefix
		remote  string
		host    string
		tls     bool
		header  map[string]string
		want    string
		client  string // the address ForwardedOf gives ("": the zero Addr)
	}{
		{"plain http", "", nil, "192.0.2.1:5000", "www.example.org", false, nil, "http://ams1.example.org/a", "192.0.2.1"},
		{"TLS on the connection", "", nil, "192.0.2.1:5000", "www.example.org", true, nil, "https://ams1.example.org/a", "192.0.2.1"},
		{"TLS, explicit 443 dropped", "auto", nil, "192.0.2.1:5000", "www.example.org:443", true, nil, "https://ams1.example.org/a", "192.0.2.1"},
		{"X-Forwarded-Proto from a trusted proxy", "", lb, "10.1.2.3:5000", "www.example.org", false,
			map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}, "https://ams1.example.org/a", "198.51.100.7"},
		{"X-Forwarded-Proto, Host :443 dropped", "", lb, "10.1.2.3:5000", "www.example.org:443", false,
			map[string]string{"X-Forwarded-Proto": "https"}, "https://ams1.example.org/a", "10.1.2.3"},
		{"X-Forwarded-Proto, Host :80 kept for https", "", lb, "10.1.2.3:5000", "www.example.org:80", false,
			map[string]string{"X-Forwarded-Proto": "HTTPS"}, "https://ams1.example.org:80/a", "10.1.2.3"},
		{"X-Forwarded-Proto from an untrusted peer", "", lb, "192.0.2.9:5000", "www.example.org", false,
			map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}, "http://ams1.example.org/a", "192.0.2.9"},
		{"X-Forwarded-Proto with no one trusted", "", nil, "10.1.2.3:5000", "www.example.org", false,
			map[string]string{"X-Forwarded-Proto": "https"}, "http://ams1.example.org/a", "10.1.2.3"},
		{"X-Forwarded-Proto nonsense ignored", "", lb, "10.1.2.3:5000", "www.example.org", false,
			map[string]string{"X-Forwarded-Proto": "gopher"}, "http://ams1.example.org/a", "10.1.2.3"},
		{"Forwarded proto", "", lb, "10.1.2.3:5000", "www.example.org", false,
			map[string]string{"Forwarded": `for="[2001:db8:2::5]:4711";proto=https;by=10.1.2.3`}, "https://ams1.example.org/a", "2001:db8:2::5"},
		{"Forwarded wins over X-Forwarded-Proto", "", lb, "10.1.2.3:5000", "www.example.org", false,
			map[string]string{"Forwarded": "for=198.51.100.7;proto=http", "X-Forwarded-Proto": "https"}, "http://ams1.example.org/a", "198.51.100.7"},
		{"Forwarded chain, rightmost untrusted", "", lb, "10.1.2.3:5000", "www.example.org", false,
			map[string]string{"Forwarded": "for=203.0.113.66;proto=http, for=198.51.100.7;proto=https, for=10.9.9.9"}, "https://ams1.example.org/a", "198.51.100.7"},
		{"X-Forwarded-For chain, rightmost untrusted", "", lb, "10.1.2.3:5000", "www.example.org", false,
			map[string]string{"X-Forwarded-For": "203.0.113.66, 198.51.100.7, 10.9.9.9", "X-Forwarded-Proto": "https"}, "https://ams1.example.org/a", "198.51.100.7"},
		{"Forwarded for=unknown", "", lb, "10.1.2.3:5000", "www.example.org", false,
			map[string]string{"Forwarded": "for=unknown;proto=https"}, "https://ams1.example.org/a", ""},
		{"scheme https set", "https", nil, "192.0.2.1:5000", "www.example.org:443", false, nil, "https://ams1.example.org/a", "192.0.2.1"},
		{"scheme http set, over TLS", "http", nil, "192.0.2.1:5000", "www.example.org:80", true, nil, "http://ams1.example.org/a", "192.0.2.1"},
		{"scheme http set, trusted proxy ignored", "http", lb, "10.1.2.3:5000", "www.example.org", false,
			map[string]string{"X-Forwarded-Proto": "https"}, "http://ams1.example.org/a", "10.1.2.3"},
		{"bad Host port dropped", "", nil, "192.0.2.1:5000", "www.example.org:80.evil.example", false, nil, "http://ams1.example.org/a", "192.0.2.1"},
		{"IPv4-mapped peer trusted", "", lb, "[::ffff:10.1.2.3]:5000", "www.example.org", false,
			map[string]string{"X-Forwarded-Proto": "https"}, "https://ams1.example.org/a", "10.1.2.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/a", nil)
			r.Host, r.RemoteAddr = tt.host, tt.remote
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			fw := ForwardedOf(r, tt.trusted)
			if got := RedirectLocation(r, RequestScheme(tt.scheme, r.TLS != nil, fw.Proto), "ams1.example.org"); got != tt.want {
				t.Errorf("Location %q, want %q", got, tt.want)
			}
			want := netip.Addr{}
			if tt.client != "" {
				want = netip.MustParseAddr(tt.client)
			}
			if fw.Client != want {
				t.Errorf("client %v, want %v", fw.Client, want)
			}
		})
	}
}

func TestGroupSnapshotCandidates(t *testing.T) {
	v := testView(nil)
	v.Members = append(v.Members,
		api.MemberView{MemberInfo: api.MemberInfo{Name: "bad1", Host: "bad host\r\nX: y", Capacity: 100}, State: "up"},
		api.MemberView{MemberInfo: api.MemberInfo{Name: "nohost", Capacity: 100}, State: "up"},
	)
	tests := []struct {
		name string
		self string
		want int
	}{
		{"member: self, down, draining and bad hosts left out", "fra1", 2},
		{"dispatcher: every member up or unknown", "", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := snapshot(t, v, tt.self).Candidates(); got != tt.want {
				t.Errorf("%d candidates, want %d", got, tt.want)
			}
		})
	}
	t.Run("unknown policy", func(t *testing.T) {
		v := testView(nil)
		v.Policy = "best-effort"
		if _, err := NewGroupSnapshot(v, "fra1", t0, time.Second, RedirectBooking{}); err == nil {
			t.Error("no error for an unknown policy")
		}
	})
}

// TestGroupSnapshotFigures checks that the pick uses the view's figures as
// dnsd measured them: reported load plus pending load over capacity, and
// reported bytes per second over bandwidth.
func TestGroupSnapshotFigures(t *testing.T) {
	europe := scheduler.Client{Loc: scheduler.Location{Lat: 50.9, Lon: 6.9, HasCoords: true, Continent: "EU"}}
	tests := []struct {
		name       string
		ams1       func(m *api.MemberView) // changes ams1, the sibling nearest the client
		candidates int
		want       string
	}{
		{"room: the nearest", func(m *api.MemberView) { m.Load = 50 }, 2, "ams1.mirrors.example.org"},
		{"pending load counts toward the high watermark", func(m *api.MemberView) { m.Load, m.Pending = 50, 45 }, 2, "nyc1.mirrors.example.org"},
		{"just below the high watermark with pending", func(m *api.MemberView) { m.Load, m.Pending = 50, 39 }, 2, "ams1.mirrors.example.org"},
		{"utilization field ignored", func(m *api.MemberView) { m.Load, m.Utilization = 10, 5 }, 2, "ams1.mirrors.example.org"},
		{"no capacity: never below the high watermark", func(m *api.MemberView) { m.Capacity = 0 }, 2, "nyc1.mirrors.example.org"},
		{"negative load left out", func(m *api.MemberView) { m.Load = -1 }, 1, "nyc1.mirrors.example.org"},
		{"NaN pending left out", func(m *api.MemberView) { m.Pending = math.NaN() }, 1, "nyc1.mirrors.example.org"},
		{"infinite load left out", func(m *api.MemberView) { m.Load = math.Inf(1) }, 1, "nyc1.mirrors.example.org"},
		{"NaN capacity left out", func(m *api.MemberView) { m.Capacity = math.NaN() }, 1, "nyc1.mirrors.example.org"},
		{"uplink full, few requests: not a target", func(m *api.MemberView) { m.Load, m.Bandwidth, m.BytesPerSecond = 5, 125e6, 125e6 }, 2, "nyc1.mirrors.example.org"},
		{"uplink at the high watermark: not a target", func(m *api.MemberView) { m.Load, m.Bandwidth, m.BytesPerSecond = 5, 125e6, 0.9*125e6 }, 2, "nyc1.mirrors.example.org"},
		{"uplink with room", func(m *api.MemberView) { m.Load, m.Bandwidth, m.BytesPerSecond = 5, 125e6, 0.5*125e6 }, 2, "ams1.mirrors.example.org"},
		{"no bandwidth (an older dnsd): bytes do not count", func(m *api.MemberView) { m.Load, m.BytesPerSecond = 5, 125e6 }, 2, "ams1.mirrors.example.org"},
		{"bandwidth_utilization field ignored", func(m *api.MemberView) { m.Bandwidth, m.BandwidthUtilization = 125e6, 5 }, 2, "ams1.mirrors.example.org"},
		{"negative bytes per second left out", func(m *api.MemberView) { m.Bandwidth, m.BytesPerSecond = 125e6, -1 }, 1, "nyc1.mirrors.example.org"},
		{"NaN bytes per second left out", func(m *api.MemberView) { m.Bandwidth, m.BytesPerSecond = 125e6, math.NaN() }, 1, "nyc1.mirrors.example.org"},
		{"infinite bandwidth left out", func(m *api.MemberView) { m.Bandwidth = math.Inf(1) }, 1, "nyc1.mirrors.example.org"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := testView(map[string]float64{"nyc1": 0.1})
			tt.ams1(&v.Members[1])
			s := snapshot(t, v, "fra1")
			if n := s.Candidates(); n != tt.candidates {
				t.Errorf("%d candidates, want %d", n, tt.candidates)
			}
			host, _, ok := s.Pick(europe, rand.New(rand.NewPCG(1, 2)), t0, false)
			if !ok || host != tt.want {
				t.Errorf("Pick = %q, %v; want %q", host, ok, tt.want)
			}
		})
	}
}

// TestLoadMeterBandwidth checks this mirror's own utilization, the one
// its redirects follow: the larger of its serving load over its capacity
// and its bytes per second over its bandwidth.
func TestLoadMeterBandwidth(t *testing.T) {
	tests := []struct {
		name      string
		bandwidth float64          // bytes per second
		reload    func(*LoadMeter) // nil: none
		requests  int              // of 100 kB each, in the half second since the start
		want      float64
	}{
		{"no bandwidth: the load alone", 0, nil, 5, 0.1},  // 10·10/s over 1000
		{"uplink full with few requests", 1e6, nil, 5, 1}, // 1 MB/s over 1 MB/s
		{"uplink half full", 2e6, nil, 5, 0.5},            // 1 MB/s over 2 MB/s
		{"load the larger", 100e6, nil, 5, 0.1},           // 1% of the uplink
		{"no limit after a reload", 1e6, func(m *LoadMeter) { m.SetLimits(1000, 0) }, 5, 0.1},
		{"a lower bandwidth after a reload", 2e6, func(m *LoadMeter) { m.SetLimits(1000, 1e6) }, 5, 1},
		{"idle", 1e6, nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			rep, err := probe.NewReporter(probe.ReporterConfig{Group: "www", Member: "fra1", Capacity: 1000, Window: time.Second,
				RunQueue: func() (float64, error) { return 0, nil }, Clock: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			meter := NewLoadMeter(rep, 1000, tt.bandwidth, 10*time.Millisecond)
			if tt.reload != nil {
				tt.reload(meter)
			}
			for range tt.requests {
				rep.RequestStarted()
				rep.RequestDone(100e3, false)
			}
			now = now.Add(500 * time.Millisecond) // 5 requests in 0.5 s: 10 requests/s, 1 MB/s
			if got := meter.Utilization(now); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("utilization %g, want %g", got, tt.want)
			}
		})
	}
}
