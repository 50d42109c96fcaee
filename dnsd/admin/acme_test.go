package admin

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd/acme"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

const (
	acmeValue1 = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
	acmeValue2 = "9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI"
)

// acmeEnv is the admin API with the groups and challenge routes in front
// of a real Controller and Book, signed at a clock of its own.
type acmeEnv struct {
	h    http.Handler
	book *acme.Book
	dns  acme.Served
	ctl  *members.Controller
	now  time.Time
}

func newACMEEnv(t *testing.T) *acmeEnv {
	t.Helper()
	dir := t.TempDir()
	config := strings.Replace(testenv.Config(""), "state_file: state.json\n", "", 1)
	for name, text := range map[string]string{"example.org.zone": testenv.Zone, "dnsd.yaml": config} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := &acmeEnv{now: time.Unix(1_800_000_000, 0)}
	clock := func() time.Time { return e.now }
	reg := prometheus.NewRegistry()
	disp, err := dispatch.New(dispatch.Options{Registry: reg, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	w, err := probe.NewWatcher(probe.WatcherConfig{Registerer: reg, Rand: rand.New(rand.NewPCG(1, 2)), Now: clock,
		Health: probe.HealthConfig{Rise: 2, Fall: 3, FlapLimit: -1}, OnUpdate: disp.Observe})
	if err != nil {
		t.Fatal(err)
	}
	if e.ctl, err = members.New(members.Options{Registry: reg, Answers: disp, Server: testenv.Server(t, reg, disp), Watcher: w, Now: clock}); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl.Load(set); err != nil {
		t.Fatal(err)
	}
	store := acme.NewMemory()
	if e.book, err = acme.New(acme.Options{Set: e.ctl.Current, Store: store, Now: clock, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	e.dns = acme.Served{Store: store, Now: clock}
	e.h = NewHandler(Options{Logger: testenv.DiscardLogger(), Gatherer: reg, Membership: e.ctl, Challenges: e.book,
		Verifier: api.NewVerifier(30*time.Second, 0), Now: clock})
	return e
}

// do sends a request signed with secret ("" for none) a second later
// than the last.
func (e *acmeEnv) do(t *testing.T, method, path, secret string, body any) (int, string) {
	t.Helper()
	e.now = e.now.Add(time.Second)
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	r := httptest.NewRequest(method, path, bytes.NewReader(b))
	if secret != "" {
		api.SignRequest(r, []byte(secret), b, e.now)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func TestChallengeRoutes(t *testing.T) {
	e := newACMEEnv(t)
	path := func(member string) string { return api.PublishChallenge.Path("www.example.org.", member) }
	ch := func(name, value string) api.ACMEChallenge { return api.ACMEChallenge{Name: name, Value: value} }
	for _, tc := range []struct {
		name, method, member, secret string
		body                         any
		code                         int
		want                         string
	}{
		{"group name", http.MethodPut, "fra1", testenv.Secret, ch("www.example.org", acmeValue1), 200, `"name":"www.example.org."`},
		{"own host", http.MethodPut, "fra1", testenv.Secret, ch("fra1.example.org.", acmeValue2), 200, `"expires":"`},
		{"unsigned", http.MethodPut, "fra1", "", ch("www.example.org.", acmeValue1), 401, "signature"},
		{"wrong secret", http.MethodPut, "fra1", "not-the-secret", ch("www.example.org.", acmeValue1), 401, "signature"},
		{"a name of the zone", http.MethodPut, "fra1", testenv.Secret, ch("ns1.example.org.", acmeValue1), 403, "neither"},
		{"unknown member", http.MethodPut, "nobody", testenv.Secret, ch("www.example.org.", acmeValue1), 403, "no member"},
		{"bad value", http.MethodPut, "fra1", testenv.Secret, ch("www.example.org.", "x"), 400, "43 base64url"},
		{"unknown field", http.MethodPut, "fra1", testenv.Secret, map[string]string{"name": "www.example.org.", "txt": "x"}, 400, "unknown field"},
		{"remove", http.MethodDelete, "fra1", testenv.Secret, ch("fra1.example.org.", acmeValue2), 200, `"removed":true`},
		{"remove again", http.MethodDelete, "fra1", testenv.Secret, ch("fra1.example.org.", acmeValue2), 200, `"removed":false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.do(t, tc.method, path(tc.member), tc.secret, tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%d %s; want %d with %q", code, body, tc.code, tc.want)
			}
		})
	}
	code, body := e.do(t, http.MethodGet, api.ListChallenges.Path(), "", nil)
	var list api.ACMEChallenges
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Challenges) != 1 || list.Challenges[0].Value != acmeValue1 {
		t.Fatalf("list: %d %s", code, body)
	}
	if got := e.dns.TXT("_acme-challenge.www.example.org."); len(got) != 1 || got[0] != acmeValue1 {
		t.Fatalf("served %q", got)
	}
}

// TestChallengeMemberRemoved: a run-time member publishes for its host;
// once it leaves the group (GROUP-EXIT) its value is listed no more, and
// served no more after a sweep (dnsd's watcher forgets it at once).
func TestChallengeMemberRemoved(t *testing.T) {
	e := newACMEEnv(t)
	info := api.MemberInfo{Name: "ams1", Host: "ams1.example.org.", Addresses: []string{"10.0.3.1"}, Capacity: 100}
	if code, body := e.do(t, http.MethodPost, api.AddMember.Path("www.example.org."), testenv.Secret, info); code != 201 {
		t.Fatalf("add: %d %s", code, body)
	}
	if code, body := e.do(t, http.MethodPut, api.PublishChallenge.Path("www.example.org.", "ams1"), testenv.Secret,
		api.ACMEChallenge{Name: "ams1.example.org", Value: acmeValue1}); code != 200 {
		t.Fatalf("publish: %d %s", code, body)
	}
	q := "_acme-challenge.ams1.example.org."
	if got := e.dns.TXT(q); len(got) != 1 {
		t.Fatalf("served %q", got)
	}
	if code, body := e.do(t, http.MethodDelete, api.RemoveMember.Path("www.example.org.", "ams1"), testenv.Secret, nil); code != 200 {
		t.Fatalf("remove: %d %s", code, body)
	}
	if got := e.book.List(); len(got) != 0 {
		t.Fatalf("listed after the member left: %v", got)
	}
	if n := e.book.Sweep(); n != 1 {
		t.Errorf("Sweep dropped %d, want 1", n)
	}
	if got := e.dns.TXT(q); got != nil {
		t.Fatalf("served after the member left and a sweep: %q", got)
	}
}

// TestChallengeFlood: beyond the member's burst every request is 429
// with Retry-After and changes nothing.
func TestChallengeFlood(t *testing.T) {
	e := newACMEEnv(t)
	p := api.PublishChallenge.Path("www.example.org.", "fra1")
	codes := map[int]int{}
	for range 3 * acme.RequestBurst {
		code, _ := e.do(t, http.MethodPut, p, testenv.Secret, api.ACMEChallenge{Name: "www.example.org.", Value: acmeValue1})
		codes[code]++
		e.now = e.now.Add(-time.Second) // the flood comes within one second
	}
	if codes[200] != acme.RequestBurst || codes[429] != 2*acme.RequestBurst {
		t.Fatalf("codes %v", codes)
	}
	if n := len(e.book.List()); n != 1 {
		t.Fatalf("%d live values", n)
	}
}

// FuzzPublishChallenge sends any body to api.PublishChallenge, signed:
// it is answered 200 (and then served), 400 or 403, never anything else,
// and a refused body changes nothing.
func FuzzPublishChallenge(f *testing.F) {
	for _, s := range []string{
		`{"name":"www.example.org","value":"` + acmeValue1 + `"}`,
		`{"name":"fra1.example.org.","value":"` + acmeValue2 + `"}`,
		`{"name":"ns1.example.org.","value":"` + acmeValue1 + `"}`,
		`{"name":"*.example.org","value":"` + acmeValue1 + `"}`,
		`{"name":"www.example.org","value":"x"}`,
		`{"name":"www.example.org"}`,
		`{"name":"www.example.org","value":"` + acmeValue1 + `","extra":1}`,
		`[]`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e := newACMEEnv(t)
		e.now = e.now.Add(time.Second)
		r := httptest.NewRequest(http.MethodPut, api.PublishChallenge.Path("www.example.org.", "fra1"), bytes.NewReader(body))
		api.SignRequest(r, []byte(testenv.Secret), body, e.now)
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		live := e.book.List()
		switch w.Code {
		case http.StatusOK:
			var c api.ACMEChallenge
			if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil || len(live) != 1 || live[0].Value != c.Value {
				t.Fatalf("200 %s, live %v", w.Body, live)
			}
			if got := e.dns.TXT(acme.Label + "." + c.Name); len(got) != 1 {
				t.Fatalf("published %s, served %q", c.Name, got)
			}
		case http.StatusBadRequest, http.StatusForbidden:
			if len(live) != 0 {
				t.Fatalf("%d, yet live %v", w.Code, live)
			}
		default:
			t.Fatalf("status %d %s", w.Code, w.Body)
		}
	})
}
