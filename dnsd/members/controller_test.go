package members_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/admin"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/intake"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/zones"
)

// ctlEnv is a Controller with a real Watcher, Dispatcher, DNS server and
// admin API.
type ctlEnv struct {
	t     *testing.T
	dir   string
	set   *zones.Set
	disp  *dispatch.Dispatcher
	srv   *dnsd.Server
	dns   string // the server's UDP address
	ctl   *members.Controller
	in    *intake.Intake
	watch *probe.Watcher
	admin *httptest.Server
	reg   *prometheus.Registry
	stop  context.CancelFunc
	done  chan struct{}
}

func startCtl(t *testing.T, dir, config string) *ctlEnv {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), []byte(testenv.Zone), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := &ctlEnv{t: t, dir: dir, set: set, done: make(chan struct{})}
	reg := prometheus.NewRegistry()
	e.reg = reg
	if e.disp, err = dispatch.New(dispatch.Options{Registry: reg, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	w, err := probe.NewWatcher(probe.WatcherConfig{Registerer: reg, Rand: rand.New(rand.NewPCG(1, 2)),
		Health: probe.HealthConfig{Rise: 2, Fall: 3, FlapLimit: -1}, OnUpdate: e.disp.Observe})
	if err != nil {
		t.Fatal(err)
	}
	e.watch = w
	e.srv = testenv.Server(t, reg, e.disp)
	if e.ctl, err = members.New(members.Options{Registry: reg, Answers: e.disp, Server: e.srv, Watcher: w}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl.Load(set); err != nil {
		t.Fatal(err)
	}
	if e.in, err = intake.New(intake.Options{Groups: e.ctl.Current, Watcher: w, Redirects: e.disp, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	e.dns = testenv.ServeUDP(t, e.srv)
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	go func() { defer close(e.done); _ = w.Run(ctx) }()
	e.admin = httptest.NewServer(admin.NewHandler(admin.Options{Logger: testenv.DiscardLogger(), Gatherer: reg, Membership: e.ctl, Reports: e.in,
		Verifier: api.NewVerifier(30*time.Second, 0)}))
	t.Cleanup(func() { e.admin.Close(); cancel(); <-e.done })
	if problems, err := promlint.NewWithMetricFamilies(testenv.Gather(t, reg)).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
	return e
}

// answered returns the member addresses of one A answer for the group.
func (e *ctlEnv) answered() map[string]bool {
	ans, err := e.disp.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: netip.MustParseAddr("127.0.0.1")})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, a := range ans.Addrs {
		out[a.String()] = true
	}
	return out
}

// call sends a request to the admin API, signed with secret when non-nil.
func (e *ctlEnv) call(method, path string, body []byte, secret []byte, at time.Time) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.admin.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if secret != nil {
		api.SignRequest(req, secret, body, at)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestControllerHealth(t *testing.T) {
	fra := testenv.NewFakeMirror(t, "www.example.org.", "fra1")
	e := startCtl(t, t.TempDir(), testenv.Config(fra.Srv.URL+"/v1/load"))
	ams := testenv.NewFakeMirror(t, "www.example.org.", "ams1")
	add := fmt.Sprintf(`{"name":"ams1","host":"ams1.example.org.","addresses":["10.0.1.2"],"capacity":1000,"probe":%q}`, ams.Srv.URL+"/v1/load")
	if code, body := e.call("POST", "/v1/groups/www.example.org./members", []byte(add), []byte(testenv.Secret), time.Now()); code != http.StatusCreated {
		t.Fatalf("GROUP-ADD: %d %s", code, body)
	}
	probetest.Until(t, 5*time.Second, func() string {
		v, _ := e.ctl.View("www.example.org")
		if len(v.Members) != 2 || v.Members[0].State != "up" || v.Members[1].State != "up" {
			return fmt.Sprintf("both members up: members %+v", v.Members)
		}
		return ""
	})
	if a := e.answered(); !a["10.0.1.1"] || !a["10.0.1.2"] {
		t.Fatalf("answers %v, want both", a)
	}

	// /v1/load starts failing: out after fall (3) failed probes. The first
	// can come at once, the next two each an interval of 40ms less the
	// jitter of 5ms later, so not before 2 × 35ms.
	start := time.Now()
	fra.Failing.Store(true)
	probetest.Until(t, 5*time.Second, func() string {
		if e.answered()["10.0.1.1"] {
			return "fra1 leaves the answers: still answered"
		}
		return ""
	})
	if took := time.Since(start); took < 2*(40-5)*time.Millisecond {
		t.Errorf("fra1 left after %v: before fall×interval", took)
	}
	t.Logf("fra1 left the answers %v after its probe started failing (fall 3 × 40ms)", time.Since(start).Round(time.Millisecond))
	v, _ := e.ctl.View("www.example.org")
	if v.Members[0].State != "down" {
		t.Errorf("fra1 state %s, want down", v.Members[0].State)
	}
	start = time.Now()
	fra.Failing.Store(false)
	probetest.Until(t, 5*time.Second, func() string {
		if a := e.answered(); !a["10.0.1.1"] {
			return fmt.Sprintf("fra1 back in the answers: answered %v", a)
		}
		return ""
	})
	t.Logf("fra1 came back %v after its probe recovered (rise 2 × 40ms)", time.Since(start).Round(time.Millisecond))

	// GROUP-EXIT removes the member from answers at once.
	if code, body := e.call("DELETE", "/v1/groups/www.example.org./members/ams1", []byte{}, []byte(testenv.Secret), time.Now()); code != http.StatusOK {
		t.Fatalf("GROUP-EXIT: %d %s", code, body)
	}
	if e.answered()["10.0.1.2"] {
		t.Error("ams1 still answered right after GROUP-EXIT")
	}
	if _, watched := e.watch.State("www.example.org.", "ams1"); watched {
		t.Error("ams1 is still watched (probed) after GROUP-EXIT")
	}
}

func TestControllerPersistence(t *testing.T) {
	dir := t.TempDir()
	e := startCtl(t, dir, testenv.Config(""))
	add := `{"name":"ams1","host":"ams1.example.org.","addresses":["10.0.1.2","fd00::2"],"capacity":500,"bandwidth":125000000,"location":{"lat":52.37,"lon":4.9,"country":"NL"}}`
	if code, body := e.call("POST", "/v1/groups/www.example.org./members", []byte(add), []byte(testenv.Secret), time.Now()); code != http.StatusCreated {
		t.Fatalf("GROUP-ADD: %d %s", code, body)
	}
	if code, body := e.call("POST", "/v1/groups/www.example.org./members/fra1/drain", []byte{}, []byte(testenv.Secret), time.Now()); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, body)
	}
	if a := e.answered(); a["10.0.1.1"] || !a["10.0.1.2"] {
		t.Fatalf("answers %v: want ams1 only (fra1 drained)", a)
	}
	e.stop()

	// A restart: a new controller over the same state file.
	e2 := startCtl(t, dir, testenv.Config(""))
	v, err := e2.ctl.View("www.example.org")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Members) != 2 || v.Members[1].Name != "ams1" || v.Members[1].Source != "runtime" || v.Members[1].Capacity != 500 || v.Members[1].Bandwidth != 125e6 {
		t.Fatalf("after restart: %+v", v.Members)
	}
	probetest.Until(t, 2*time.Second, func() string {
		if a := e2.answered(); a["10.0.1.1"] || !a["10.0.1.2"] {
			return fmt.Sprintf("fra1 still drained after restart: answered %v", a)
		}
		return ""
	})

	if code, body := e2.call("POST", "/v1/groups/www.example.org./members/fra1/undrain", []byte{}, []byte(testenv.Secret), time.Now()); code != http.StatusOK {
		t.Fatalf("undrain: %d %s", code, body)
	}
	if !e2.answered()["10.0.1.1"] {
		t.Error("fra1 not answered after undrain")
	}
	data, _ := os.ReadFile(filepath.Join(dir, "state.json"))
	if strings.Contains(string(data), testenv.Secret) {
		t.Error("the state file holds the group secret")
	}
}

func TestControllerCorruptState(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte("{\n  \"version\": 1,\n  \"members\": {oops}\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "example.org.zone"), []byte(testenv.Zone), 0o644)
	os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(testenv.Config("")), 0o644)
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	disp, _ := dispatch.New(dispatch.Options{Seed: 1})
	ctl, _ := members.New(members.Options{Answers: disp, Server: testenv.Server(t, nil, disp)})
	err = ctl.Load(set)
	if err == nil || !strings.Contains(err.Error(), "state.json is corrupt") || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("corrupt state file: %v; want an error naming the file and line", err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "state.json"))
	if !strings.Contains(string(data), "oops") {
		t.Error("the corrupt state file was overwritten")
	}
}

func TestAdminAPIBadInput(t *testing.T) {
	e := startCtl(t, t.TempDir(), testenv.Config(""))
	secret := []byte(testenv.Secret)
	now := time.Now()
	good := []byte(`{"name":"new1","host":"new1.example.org.","addresses":["10.0.9.1"],"capacity":10}`)
	report := func(member string) []byte {
		b, _ := json.Marshal(probe.Report{Group: "www.example.org.", Member: member, Seq: 1, Time: now, R: 2, Load: 20, Capacity: 1000})
		return b
	}
	cases := []struct {
		name     string
		method   string
		path     string
		body     []byte
		secret   []byte
		at       time.Time
		wantCode int
		wantBody string
	}{
		{"list", "GET", "/v1/groups", nil, nil, now, 200, `"name":"www.example.org."`},
		{"view hides the secret", "GET", "/v1/groups/www.example.org", nil, nil, now, 200, `"members"`},
		{"view of an unknown group", "GET", "/v1/groups/nope.example.org", nil, nil, now, 404, "unknown group"},
		{"add without a signature", "POST", "/v1/groups/www.example.org./members", good, nil, now, 401, "missing signature"},
		{"add with the wrong secret", "POST", "/v1/groups/www.example.org./members", good, []byte("wrong"), now, 401, "signature mismatch"},
		{"add signed an hour ago", "POST", "/v1/groups/www.example.org./members", good, secret, now.Add(-time.Hour), 401, "too old"},
		{"add signed in the future", "POST", "/v1/groups/www.example.org./members", good, secret, now.Add(time.Hour), 401, "in the future"},
		{"add to an unknown group", "POST", "/v1/groups/nope.example.org./members", good, secret, now, 404, "unknown group"},
		{"malformed JSON", "POST", "/v1/groups/www.example.org./members", []byte(`{"name":`), secret, now, 400, "malformed JSON"},
		{"unknown field", "POST", "/v1/groups/www.example.org./members", []byte(`{"name":"x","colour":"red"}`), secret, now, 400, "unknown field"},
		{"address not an IP", "POST", "/v1/groups/www.example.org./members", []byte(`{"name":"x1","host":"x1.example.org.","addresses":["10.0.0.300"],"capacity":1}`), secret, now, 400, "not an IP address"},
		{"invalid member", "POST", "/v1/groups/www.example.org./members", []byte(`{"name":"x1","host":"x1.example.org.","addresses":["10.0.0.3"],"capacity":0}`), secret, now, 400, "capacity must be > 0"},
		{"negative bandwidth", "POST", "/v1/groups/www.example.org./members", []byte(`{"name":"x1","host":"x1.example.org.","addresses":["10.0.0.3"],"capacity":1,"bandwidth":-1}`), secret, now, 400, `member \"x1\": bandwidth -1 B/s: want 0 (no limit) or a positive rate`},
		{"bandwidth without its unit", "POST", "/v1/groups/www.example.org./members", []byte(`{"name":"x1","host":"x1.example.org.","addresses":["10.0.0.3"],"capacity":1,"bandwidth":100}`), secret, now, 400, "bandwidth 100 B/s is below 1000 B/s"},
		{"bandwidth as text", "POST", "/v1/groups/www.example.org./members", []byte(`{"name":"x1","host":"x1.example.org.","addresses":["10.0.0.3"],"capacity":1,"bandwidth":"1Gbit/s"}`), secret, now, 400, "bandwidth"},
		{"duplicate of a static member", "POST", "/v1/groups/www.example.org./members", []byte(`{"name":"fra1","host":"f.example.org.","addresses":["10.0.0.3"],"capacity":1}`), secret, now, 409, "already a member"},
		{"oversized body", "POST", "/v1/groups/www.example.org./members", bytes.Repeat([]byte("x"), admin.MaxBody+1), secret, now, 413, "larger than"},
		{"remove a static member", "DELETE", "/v1/groups/www.example.org./members/fra1", []byte{}, secret, now, 409, "config file"},
		{"remove an unknown member", "DELETE", "/v1/groups/www.example.org./members/ghost", []byte{}, secret, now, 404, "unknown member"},
		{"push without a signature", "POST", "/v1/groups/www.example.org./members/fra1/load", report("fra1"), nil, now, 401, "missing signature"},
		{"push signed 2 minutes ago", "POST", "/v1/groups/www.example.org./members/fra1/load", report("fra1"), secret, now.Add(-2 * time.Minute), 401, "too old"},
		{"push for another member", "POST", "/v1/groups/www.example.org./members/fra1/load", report("ams1"), secret, now, 400, "posted to"},
		{"push malformed report", "POST", "/v1/groups/www.example.org./members/fra1/load", []byte(`{"group":1}`), secret, now, 400, "report"},
		{"push accepted", "POST", "/v1/groups/www.example.org./members/fra1/load", report("fra1"), secret, now, 202, "accepted"},
		{"drain unknown member", "POST", "/v1/groups/www.example.org./members/ghost/drain", []byte{}, secret, now, 404, "unknown member"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.call(tc.method, tc.path, tc.body, tc.secret, tc.at)
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Errorf("%s %s: %d %s; want %d with %q", tc.method, tc.path, code, body, tc.wantCode, tc.wantBody)
			}
			if strings.Contains(body, testenv.Secret) {
				t.Errorf("response shows the secret: %s", body)
			}
			if !strings.HasPrefix(strings.TrimSpace(body), "{") {
				t.Errorf("response is not JSON: %s", body)
			}
		})
	}
	// The same signed request twice: the second is a replay. (Its report
	// is newer than the one accepted above, which it would repeat.)
	body, _ := json.Marshal(probe.Report{Group: "www.example.org.", Member: "fra1", Seq: 2, Time: now.Add(time.Second), R: 2, Load: 20, Capacity: 1000})
	r1, _ := http.NewRequest("POST", e.admin.URL+"/v1/groups/www.example.org./members/fra1/load", bytes.NewReader(body))
	api.SignRequest(r1, secret, body, now.Add(time.Second))
	r2, _ := http.NewRequest("POST", e.admin.URL+"/v1/groups/www.example.org./members/fra1/load", bytes.NewReader(body))
	r2.Header = r1.Header.Clone()
	for i, r := range []*http.Request{r1, r2} {
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := []int{202, 401}[i]; resp.StatusCode != want {
			t.Errorf("request %d of a replayed pair: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	// Nothing changed through the refused writes.
	v, _ := e.ctl.View("www.example.org")
	if len(v.Members) != 1 {
		t.Errorf("members after refused writes: %+v", v.Members)
	}
}

// TestControllerJoined: a member that added itself (joined) is shown so
// in the view, before and after a restart; one added by an operator is
// not.
func TestControllerJoined(t *testing.T) {
	dir := t.TempDir()
	e := startCtl(t, dir, testenv.Config(""))
	for _, add := range []string{
		`{"name":"ams1","host":"ams1.example.org.","addresses":["10.0.1.2"],"capacity":500,"joined":true}`,
		`{"name":"ams2","host":"ams2.example.org.","addresses":["10.0.1.3"],"capacity":500}`,
	} {
		if code, body := e.call("POST", "/v1/groups/www.example.org./members", []byte(add), []byte(testenv.Secret), time.Now()); code != http.StatusCreated {
			t.Fatalf("GROUP-ADD: %d %s", code, body)
		}
	}
	want := map[string]bool{"fra1": false, "ams1": true, "ams2": false}
	check := func(t *testing.T, c *members.Controller) {
		v, err := c.View("www.example.org")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range v.Members {
			if m.Joined != want[m.Name] {
				t.Errorf("%s: joined %v, want %v", m.Name, m.Joined, want[m.Name])
			}
		}
	}
	t.Run("view", func(t *testing.T) { check(t, e.ctl) })
	e.stop()
	t.Run("after restart", func(t *testing.T) { check(t, startCtl(t, dir, testenv.Config("")).ctl) })
}
