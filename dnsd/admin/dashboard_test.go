package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/intake"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/scheduler"
	"github.com/transmirror/transmirror/zones"
)

const dashToken = "dashboard-token-0123456789"

// dashEnv is a Controller, Watcher and dispatch.Dispatcher with the dashboard on a
// real admin server on 127.0.0.1:0.
type dashEnv struct {
	disp   *dispatch.Dispatcher
	ctl    *members.Controller
	dash   *Dashboard
	events *EventLog
	reg    *prometheus.Registry
	admin  *httptest.Server
	cancel context.CancelFunc
	mirror *testenv.FakeMirror
}

func startDash(t *testing.T, maxStreams int) *dashEnv {
	t.Helper()
	dir := t.TempDir()
	e := &dashEnv{reg: prometheus.NewRegistry(), events: NewEventLog(8, nil)}
	e.mirror = testenv.NewFakeMirror(t, "www.example.org.", "fra1")
	e.mirror.BytesPerSecond.Store(10e6) // 80% of fra1's 100Mbit/s
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), []byte(testenv.Zone), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(testenv.Config(e.mirror.Srv.URL), "addresses: [10.0.1.1], capacity: 1000,",
		"addresses: [10.0.1.1], capacity: 1000, bandwidth: 100Mbit/s, location: {lat: 50.1, lon: 8.7, country: DE, continent: EU},", 1) +
		"      - {name: nyc1, host: nyc1.example.org., addresses: [10.0.2.1], capacity: 1000}\n"
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	flows := NewAnswerFlows(0, nil)
	if e.disp, err = dispatch.New(dispatch.Options{Registry: e.reg, Seed: 7, OnAnswer: flows.Add, OnFailOpen: e.events.FailOpen}); err != nil {
		t.Fatal(err)
	}
	w, err := probe.NewWatcher(probe.WatcherConfig{Registerer: e.reg, Rand: rand.New(rand.NewPCG(1, 2)),
		Health:  probe.HealthConfig{Rise: 2, Fall: 3, FlapLimit: -1},
		OnEvent: e.events.ProbeEvent, OnUpdate: e.disp.Observe})
	if err != nil {
		t.Fatal(err)
	}
	if e.ctl, err = members.New(members.Options{Registry: e.reg, Answers: e.disp, Server: testenv.Server(t, e.reg, e.disp), Watcher: w}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl.Load(set); err != nil {
		t.Fatal(err)
	}
	if e.dash, err = NewDashboard(DashboardOptions{
		Registry: e.reg, Source: e.ctl, Flows: flows, Events: e.events, MaxStreams: maxStreams,
		HistoryInterval: 20 * time.Millisecond, StreamInterval: 20 * time.Millisecond, StreamHeartbeat: 10 * time.Millisecond,
		TokenAuth: func() bool { return true },
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	done := make(chan struct{}, 2)
	go func() { _ = w.Run(ctx); done <- struct{}{} }()
	go func() { _ = e.dash.Run(ctx); done <- struct{}{} }()
	in, err := intake.New(intake.Options{Groups: e.ctl.Current, Watcher: w, Redirects: e.disp, Registry: e.reg})
	if err != nil {
		t.Fatal(err)
	}
	e.admin = httptest.NewServer(NewHandler(Options{
		Logger: testenv.DiscardLogger(), Gatherer: e.reg, Membership: e.events.Membership(e.ctl), Reports: in,
		Verifier: api.NewVerifier(30*time.Second, 0), Dashboard: e.dash,
		AdminToken: func() string { return dashToken },
	}))
	t.Cleanup(func() {
		e.admin.CloseClientConnections()
		cancel()
		for range 2 {
			<-done
		}
		e.admin.Close()
	})
	return e
}

func (e *dashEnv) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(e.admin.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (e *dashEnv) snapshot(t *testing.T) DashboardSnapshot {
	t.Helper()
	_, body := e.get(t, "/v1/dashboard")
	var s DashboardSnapshot
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("GET /v1/dashboard: %v\n%s", err, body)
	}
	return s
}

func TestDashboardPage(t *testing.T) {
	e := startDash(t, 0)
	tests := []struct {
		path, ctype, contains string
	}{
		{"/", "text/html", `src="ui/app.js"`},
		{"/ui/app.js", "text/javascript", "EventSource"},
		{"/ui/style.css", "text/css", "--up"},
		{"/ui/world.js", "text/javascript", "TM_LAND"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, body := e.get(t, tt.path)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.ctype) {
				t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			if !strings.Contains(body, tt.contains) {
				t.Errorf("body lacks %q", tt.contains)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
		})
	}
	t.Run("no external references", func(t *testing.T) {
		for _, p := range []string{"/", "/ui/app.js", "/ui/style.css"} {
			if _, body := e.get(t, p); strings.Contains(body, "http://") && !strings.Contains(body, "http://www.w3.org/2000/svg") || strings.Contains(body, "https://") {
				t.Errorf("%s refers to another site", p)
			}
		}
	})
}

func TestDashboardData(t *testing.T) {
	e := startDash(t, 0)
	probetest.Until(t, 5*time.Second, func() string {
		v, err := e.ctl.View("www.example.org.")
		if err != nil {
			return "fra1 up: " + err.Error()
		}
		if st := v.Members[0].State; st != "up" {
			return "fra1 up: it is " + st
		}
		return ""
	})
	top := []probe.PathCount{{Path: "/iso/a.iso", Count: 12}, {Path: "/dists/stable/InRelease", Count: 3.5}}
	e.mirror.Top.Store(&top)
	e.mirror.Rescued.Store(4)
	probetest.Until(t, 5*time.Second, func() string {
		v, _ := e.ctl.View("www.example.org.")
		if len(v.Top) == 0 {
			return "fra1's top in the view: none yet"
		}
		return ""
	})
	ecs := netip.MustParsePrefix("198.51.100.0/24")
	for range 20 {
		if _, err := e.disp.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA,
			Client: netip.MustParseAddr("127.0.0.1"), ECS: ecs}); err != nil {
			t.Fatal(err)
		}
	}
	probetest.Until(t, 5*time.Second, func() string {
		for _, pts := range e.dash.history.Series("www.example.org.") {
			if len(pts) > 0 {
				return ""
			}
		}
		return "history with a rate: every series empty"
	})
	s := e.snapshot(t)
	t.Run("groups", func(t *testing.T) {
		if len(s.Groups) != 1 || len(s.Groups[0].Members) != 2 || s.Groups[0].Members[0].State != "up" || !s.TokenAuth {
			t.Fatalf("snapshot: %+v", s)
		}
	})
	t.Run("flows", func(t *testing.T) {
		var n uint64
		for _, f := range s.Groups[0].Flows {
			n += f.Answers
		}
		if n != 20*2 { // answers: 4 but two members
			t.Errorf("flows count %d answers, want 40: %+v", n, s.Groups[0].Flows)
		}
	})
	t.Run("history", func(t *testing.T) {
		if s.History == nil || s.History.Groups["www.example.org."]["fra1"] == nil {
			t.Fatalf("history: %+v", s.History)
		}
	})
	t.Run("events", func(t *testing.T) {
		if len(s.Events) == 0 || s.Events[0].Kind != EventMemberState || s.Events[0].Member != "fra1" {
			t.Errorf("events: %+v", s.Events)
		}
	})
	t.Run("both utilizations", func(t *testing.T) {
		fra := s.Groups[0].Members[0]
		if fra.Name != "fra1" || fra.Bandwidth != 12.5e6 || fra.BytesPerSecond != 10e6 || fra.BandwidthUtilization != 0.8 ||
			fra.LoadUtilization >= 0.8 || fra.Utilization != 0.8 {
			t.Errorf("fra1 %+v: want bytes/s 10e6 of 12.5e6, utilization 0.8 by bandwidth", fra)
		}
	})
	t.Run("top and rescued", func(t *testing.T) {
		g, fra := s.Groups[0], s.Groups[0].Members[0]
		if !reflect.DeepEqual(g.Top, top) || fra.Rescued != 4 || fra.LastReport == nil || fra.LastReport.Top != nil {
			t.Errorf("group top %v, fra1 rescued %d, last report %+v; want %v, 4 and a report without its top", g.Top, fra.Rescued, fra.LastReport, top)
		}
	})
	t.Run("member gauges and lint", func(t *testing.T) {
		mfs := testenv.Gather(t, e.reg)
		want := map[string]int{ // series
			"transmirror_dnsd_member_up": 2, "transmirror_dnsd_member_utilization_ratio": 2,
			"transmirror_dnsd_member_load_utilization_ratio": 2, "transmirror_dnsd_member_bandwidth_utilization_ratio": 1,
		}
		got := map[string]int{}
		for _, mf := range mfs {
			if _, ok := want[mf.GetName()]; ok {
				got[mf.GetName()] = len(mf.GetMetric())
			}
			if mf.GetName() == "transmirror_dnsd_member_bandwidth_utilization_ratio" {
				for _, m := range mf.GetMetric() {
					if v := m.GetGauge().GetValue(); v != 0.8 {
						t.Errorf("%s = %v, want fra1's 0.8", mf.GetName(), v)
					}
				}
			}
		}
		for name, n := range want {
			if got[name] != n {
				t.Errorf("%s: %d series, want %d (one per member; bandwidth: those with one)", name, got[name], n)
			}
		}
		if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) > 0 {
			t.Errorf("promlint: %v %v", problems, err)
		}
	})
}

func TestDashboardDrainAuth(t *testing.T) {
	e := startDash(t, 0)
	post := func(path, auth string, secret []byte) int {
		req, err := http.NewRequest(http.MethodPost, e.admin.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if secret != nil {
			api.SignRequest(req, secret, nil, time.Now())
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const drain = "/v1/groups/www.example.org./members/nyc1/drain"
	tests := []struct {
		name   string
		path   string
		auth   string
		secret []byte
		want   int
		state  string
	}{
		{"no credentials", drain, "", nil, http.StatusUnauthorized, "unknown"},
		{"wrong token", drain, "Bearer not-the-token-at-all", nil, http.StatusUnauthorized, "unknown"},
		{"token of another length", drain, "Bearer x", nil, http.StatusUnauthorized, "unknown"},
		{"basic scheme is not a token", drain, "Basic " + dashToken, nil, http.StatusUnauthorized, "unknown"},
		{"admin token drains", drain, "Bearer " + dashToken, nil, http.StatusOK, "draining"},
		{"admin token undrains", "/v1/groups/www.example.org./members/nyc1/undrain", "bearer " + dashToken, nil, http.StatusOK, "unknown"},
		{"signature still works", drain, "", []byte(testenv.Secret), http.StatusOK, "draining"},
		{"token does not add members", "/v1/groups/www.example.org./members", "Bearer " + dashToken, nil, http.StatusUnauthorized, "draining"},
		{"unknown member", "/v1/groups/www.example.org./members/nope/drain", "Bearer " + dashToken, nil, http.StatusNotFound, "draining"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := post(tt.path, tt.auth, tt.secret); got != tt.want {
				t.Fatalf("status %d, want %d", got, tt.want)
			}
			v, err := e.ctl.View("www.example.org.")
			if err != nil {
				t.Fatal(err)
			}
			if got := v.Members[1].State; got != tt.state {
				t.Errorf("nyc1 is %s, want %s", got, tt.state)
			}
		})
	}
	var kinds []EventKind
	for _, ev := range e.events.Snapshot() {
		if ev.Member == "nyc1" {
			kinds = append(kinds, ev.Kind)
		}
	}
	if want := []EventKind{EventDrain, EventUndrain, EventDrain}; strings.Join(kindStrings(kinds), ",") != strings.Join(kindStrings(want), ",") {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

func kindStrings(ks []EventKind) []string {
	var s []string
	for _, k := range ks {
		s = append(s, string(k))
	}
	return s
}

// sseReader reads events from a stream.
type sseReader struct{ sc *bufio.Scanner }

// next returns the next event's name and data, skipping comments.
func (r *sseReader) next() (string, string, bool) {
	var name, data string
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "" && name != "":
			return name, data, true
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	return "", "", false
}

func TestDashboardStream(t *testing.T) {
	e := startDash(t, 2)
	open := func(t *testing.T) (*http.Response, *sseReader) {
		t.Helper()
		resp, err := http.Get(e.admin.URL + "/v1/stream")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		return resp, &sseReader{sc: sc}
	}
	resp, r := open(t)
	t.Run("headers", func(t *testing.T) {
		for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("%s: %q, want %q", k, got, want)
			}
		}
	})
	t.Run("history then snapshot", func(t *testing.T) {
		seen := map[string]bool{}
		for !seen["snapshot"] || !seen["history"] {
			name, data, ok := r.next()
			if !ok {
				t.Fatalf("stream ended; seen %v", seen)
			}
			seen[name] = true
			if name == "snapshot" {
				var s DashboardSnapshot
				if err := json.Unmarshal([]byte(data), &s); err != nil || len(s.Groups) != 1 || s.History != nil {
					t.Fatalf("snapshot %v: %.200s", err, data)
				}
			}
		}
	})
	t.Run("event arrives", func(t *testing.T) {
		e.events.Add(Event{Kind: EventReload, Message: "marker-event"})
		for {
			name, data, ok := r.next()
			if !ok {
				t.Fatal("stream ended")
			}
			if name == "snapshot" && strings.Contains(data, "marker-event") {
				return
			}
		}
	})
	t.Run("bounded", func(t *testing.T) {
		open(t)
		probetest.Until(t, 5*time.Second, func() string {
			if n := testGauge(e.dash.streams); n != 2 {
				return fmt.Sprintf("two streams: %g open", n)
			}
			return ""
		})
		resp, err := http.Get(e.admin.URL + "/v1/stream")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("third stream: status %d", resp.StatusCode)
		}
	})
	t.Run("ends on shutdown", func(t *testing.T) {
		e.cancel()
		ended := make(chan struct{})
		go func() {
			for {
				if _, _, ok := r.next(); !ok {
					close(ended)
					return
				}
			}
		}()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
			t.Fatal("stream still open 5s after the dashboard stopped")
		}
		probetest.Until(t, 5*time.Second, func() string {
			if n := testGauge(e.dash.streams); n != 0 {
				return fmt.Sprintf("no stream open: %g open", n)
			}
			return ""
		})

	})
}

func testGauge(g prometheus.Gauge) float64 {
	ch := make(chan prometheus.Metric, 1)
	g.Collect(ch)
	m := <-ch
	pb := new(dto.Metric)
	_ = m.Write(pb)
	return pb.GetGauge().GetValue()
}

func TestEventLog(t *testing.T) {
	tests := []struct {
		name      string
		size, add int
		wantFirst uint64
		wantLen   int
	}{
		{"empty", 3, 0, 0, 0},
		{"partly full", 3, 2, 1, 2},
		{"exactly full", 3, 3, 1, 3},
		{"wrapped", 3, 7, 5, 3},
		{"default size", 0, 501, 2, DefaultEventLogSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewEventLog(tt.size, nil)
			ch := l.Changed()
			for range tt.add {
				l.Add(Event{Kind: EventReload})
			}
			got := l.Snapshot()
			if len(got) != tt.wantLen {
				t.Fatalf("len %d, want %d", len(got), tt.wantLen)
			}
			for i, ev := range got {
				if ev.Seq != tt.wantFirst+uint64(i) || ev.Time.IsZero() {
					t.Fatalf("event %d: %+v", i, ev)
				}
			}
			select {
			case <-ch:
				if tt.add == 0 {
					t.Error("Changed closed without an Add")
				}
			default:
				if tt.add > 0 {
					t.Error("Changed not closed by Add")
				}
			}
		})
	}
}

func TestHistory(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	h := NewHistory(3)
	for i := range 5 {
		h.Record(t0.Add(time.Duration(i)*10*time.Second), []MemberSample{
			{Group: "g.", Member: "a", AnswersTotal: uint64(i) * 100, Utilization: float64(i) / 10},
			{Group: "g.", Member: "b", AnswersTotal: 7},
		})
	}
	tests := []struct {
		name   string
		member string
		want   []HistoryPoint
	}{
		{"rate from the counter, last three kept", "a", []HistoryPoint{
			{Time: t0.Add(20 * time.Second).Unix(), Answers: 10, Utilization: 0.2},
			{Time: t0.Add(30 * time.Second).Unix(), Answers: 10, Utilization: 0.3},
			{Time: t0.Add(40 * time.Second).Unix(), Answers: 10, Utilization: 0.4},
		}},
		{"idle member", "b", []HistoryPoint{
			{Time: t0.Add(20 * time.Second).Unix()}, {Time: t0.Add(30 * time.Second).Unix()}, {Time: t0.Add(40 * time.Second).Unix()},
		}},
	}
	got := h.Series("g.")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(got[tt.member]) != len(tt.want) {
				t.Fatalf("got %+v", got[tt.member])
			}
			for i := range tt.want {
				if got[tt.member][i] != tt.want[i] {
					t.Errorf("point %d: %+v, want %+v", i, got[tt.member][i], tt.want[i])
				}
			}
		})
	}
	t.Run("removed members are forgotten", func(t *testing.T) {
		h.Record(t0.Add(time.Minute), []MemberSample{{Group: "g.", Member: "a", AnswersTotal: 500}})
		if s := h.Series("g."); len(s) != 1 || s["b"] != nil {
			t.Errorf("series %v", s)
		}
		if h.Seq() != 6 {
			t.Errorf("seq %d, want 6", h.Seq())
		}
	})
}

func TestAnswerFlows(t *testing.T) {
	var now atomic.Int64
	now.Store(1_700_000_000)
	clock := func() time.Time { return time.Unix(now.Load(), 0) }
	de := scheduler.Location{Country: "DE", Continent: "EU", Lat: 50, Lon: 8, HasCoords: true}
	us := scheduler.Location{Country: "US", Continent: "NA"}
	tests := []struct {
		name    string
		max     int
		adds    func(a *AnswerFlows)
		advance int64
		want    map[string]uint64 // "country>member" → answers
	}{
		{"counted by country and member", 0, func(a *AnswerFlows) {
			a.Add("g.", "fra1", de)
			a.Add("g.", "fra1", de)
			a.Add("g.", "nyc1", us)
		}, 0, map[string]uint64{"DE>fra1": 2, "US>nyc1": 1}},
		{"gone after a minute", 0, func(a *AnswerFlows) { a.Add("g.", "fra1", de) }, 60, map[string]uint64{}},
		{"still there at 59s", 0, func(a *AnswerFlows) { a.Add("g.", "fra1", de) }, 59, map[string]uint64{"DE>fra1": 1}},
		{"bounded: the overflow has no country", 1, func(a *AnswerFlows) {
			a.Add("g.", "fra1", de)
			a.Add("g.", "fra1", us)
			a.Add("g.", "nyc1", us)
		}, 0, map[string]uint64{"DE>fra1": 1, ">fra1": 1, ">nyc1": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAnswerFlows(tt.max, clock)
			tt.adds(a)
			now.Add(tt.advance)
			defer now.Add(-tt.advance)
			got := map[string]uint64{}
			for _, f := range a.Flows("g.") {
				got[f.Country+">"+f.Member] = f.Answers
				if f.Country == "DE" && (!f.HasCoords || f.Lat != 50 || f.Lon != 8) {
					t.Errorf("DE flow without its coordinates: %+v", f)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("flows %v, want %v", got, tt.want)
			}
			for k, n := range tt.want {
				if got[k] != n {
					t.Errorf("%s: %d, want %d", k, got[k], n)
				}
			}
		})
	}
	t.Run("totals and Keep", func(t *testing.T) {
		a := NewAnswerFlows(0, clock)
		a.Add("g.", "fra1", de)
		a.Add("g.", "nyc1", us)
		a.Add("h.", "x", us)
		a.Keep(map[string][]string{"g.": {"fra1"}})
		if a.Total("g.", "fra1") != 1 || a.Total("g.", "nyc1") != 0 || a.Total("h.", "x") != 0 || len(a.Flows("g.")) != 1 {
			t.Errorf("after Keep: %+v", a.Flows("g."))
		}
	})
}

type reloaderFunc func(context.Context) error

func (f reloaderFunc) Reload(ctx context.Context) error { return f(ctx) }

// TestEventLogReloadHidesError: the unauthenticated event feed says a
// reload failed and where to look, never the error (which quotes config
// and zone files); the caller still gets the whole error.
func TestEventLogReloadHidesError(t *testing.T) {
	secretErr := errors.New(`dnsd.yaml:3:5: zone "example.org.": example.org.zone:7: bad A A: "s3cr3t"`)
	tests := []struct {
		name     string
		err      error
		wantKind EventKind
		wantMsg  string
	}{
		{"failed", secretErr, EventReloadFailed, ReloadFailedMessage},
		{"reloaded", nil, EventReload, "configuration reloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewEventLog(4, nil)
			err := l.Reloader(reloaderFunc(func(context.Context) error { return tt.err })).Reload(context.Background())
			if !errors.Is(err, tt.err) {
				t.Errorf("Reload returned %v, want %v", err, tt.err)
			}
			got := l.Snapshot()
			if len(got) != 1 || got[0].Kind != tt.wantKind || got[0].Message != tt.wantMsg {
				t.Fatalf("events %+v, want one %s %q", got, tt.wantKind, tt.wantMsg)
			}
			if strings.Contains(got[0].Message, "s3cr3t") {
				t.Errorf("event quotes the error: %q", got[0].Message)
			}
		})
	}
}
