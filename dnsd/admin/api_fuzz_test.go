package admin

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/intake"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// fuzzGroup is the group of testenv.Config, with its static member fra1.
const fuzzGroup = "www.example.org."

// fuzzAPI is the groups API in front of a real members.Controller,
// dispatcher and watcher, driven in process: each request is signed with
// the group's secret at a clock that moves on by more than the signature
// window per request, so that every request reaches the body's decoder.
// reset builds all of it afresh from the config's Set for each input, so
// that an input behaves the same whatever ran before it (which the
// fuzzer's minimizer relies on).
type fuzzAPI struct {
	set *zones.Set
	h   http.Handler
	now time.Time
}

func newFuzzAPI(f *testing.F) *fuzzAPI {
	f.Helper()
	dir := f.TempDir()
	// No state file: the fuzzer must not write one per input.
	config := strings.Replace(testenv.Config(""), "state_file: state.json\n", "", 1)
	for name, text := range map[string]string{"example.org.zone": testenv.Zone, "dnsd.yaml": config} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	return &fuzzAPI{set: set}
}

// reset starts the API afresh: no run-time members, reports or redirect
// rates, no signature seen, the clock at its start.
func (a *fuzzAPI) reset(t testing.TB) {
	t.Helper()
	a.now = time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return a.now }
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
	ctl, err := members.New(members.Options{Registry: reg, Answers: disp, Server: testenv.Server(t, reg, disp), Watcher: w, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.Load(a.set); err != nil {
		t.Fatal(err)
	}
	in, err := intake.New(intake.Options{Groups: ctl.Current, Watcher: w, Redirects: disp, Now: clock, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	a.h = NewHandler(Options{Logger: testenv.DiscardLogger(), Gatherer: reg, Membership: ctl, Reports: in,
		Verifier: api.NewVerifier(30*time.Second, 0), Now: clock})
}

// do sends a signed request and returns the status and the body of the
// reply, which must be one JSON value.
func (a *fuzzAPI) do(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	a.now = a.now.Add(time.Minute)
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	api.SignRequest(r, []byte(testenv.Secret), body, a.now)
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, r)
	out := w.Body.Bytes()
	if !json.Valid(out) {
		t.Fatalf("%s %s: %d with a reply that is not JSON: %q", method, path, w.Code, out)
	}
	if w.Code >= 300 {
		var e api.ErrorReply
		if err := json.Unmarshal(out, &e); err != nil || e.Error == "" {
			t.Fatalf("%s %s: %d without an error text: %q", method, path, w.Code, out)
		}
	}
	return w.Code, out
}

// wantStatus fails unless code is one of want.
func wantStatus(t *testing.T, what string, code int, body []byte, want ...int) {
	t.Helper()
	for _, c := range want {
		if code == c {
			return
		}
	}
	t.Fatalf("%s: status %d (%s), want one of %v", what, code, body, want)
}

// FuzzAddMember posts GROUP-ADD bodies through decodeStrict and the
// config's member validation. A body is answered 201, 400 or 409, never
// 500; 201 and 409 only for a body that decodes strictly. An added member
// conflicts when added again, leaves with GROUP-EXIT, and the answer of
// GROUP-ADD is a fixed point: added again, it comes back unchanged. The
// seed corpus is in testdata/fuzz/FuzzAddMember.
func FuzzAddMember(f *testing.F) {
	f.Add([]byte(`{"name":"ams1","host":"ams1.example.org.","addresses":["10.0.2.1","2001:db8::1"],"capacity":500}`))
	f.Add([]byte(`{"name":"fra1","host":"fra1.example.org.","addresses":["10.0.1.1"],"capacity":1000}`))
	f.Add([]byte(`{"name":"x","host":"x","addresses":[],"capacity":0,"extra":1}`))
	a := newFuzzAPI(f)
	add := api.AddMember.Path(fuzzGroup)
	f.Fuzz(func(t *testing.T, body []byte) {
		a.reset(t)
		code, out := a.do(t, http.MethodPost, add, body)
		wantStatus(t, "GROUP-ADD", code, out, http.StatusCreated, http.StatusBadRequest, http.StatusConflict)
		var info api.MemberInfo
		decoded := decodeStrict(body, &info) == nil
		if code != http.StatusBadRequest && !decoded {
			t.Fatalf("status %d for a body that does not decode strictly", code)
		}
		if code != http.StatusCreated {
			return
		}
		var added api.MemberInfo
		if err := decodeStrict(out, &added); err != nil {
			t.Fatalf("GROUP-ADD answer %s: %v", out, err)
		}
		code, again := a.do(t, http.MethodPost, add, body)
		wantStatus(t, "the same GROUP-ADD again", code, again, http.StatusConflict)
		remove := api.RemoveMember.Path(fuzzGroup, added.Name)
		code, rm := a.do(t, http.MethodDelete, remove, nil)
		wantStatus(t, "GROUP-EXIT", code, rm, http.StatusOK)
		canon, err := json.Marshal(added)
		if err != nil {
			t.Fatal(err)
		}
		code, out2 := a.do(t, http.MethodPost, add, canon)
		wantStatus(t, "GROUP-ADD of the answer", code, out2, http.StatusCreated)
		var added2 api.MemberInfo
		if err := decodeStrict(out2, &added2); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(added, added2) {
			t.Fatalf("GROUP-ADD of its own answer changed it:\n%+v\n%+v", added, added2)
		}
		code, rm = a.do(t, http.MethodDelete, remove, nil)
		wantStatus(t, "GROUP-EXIT", code, rm, http.StatusOK)
	})
}

// FuzzPushRedirects posts dispatchers' redirect reports through
// decodeStrict, api.RedirectReport.Validate and the dispatcher's booking.
// A body is answered 202, 400 or 404, never 500; 400 exactly for a body
// that does not decode strictly into a valid report within the clock's
// window; 404 exactly for such a report that names a member the group
// does not have; else 202, and its re-encoding decodes to the same report
// and is taken again (the same report twice). The seed corpus is in
// testdata/fuzz/FuzzPushRedirects.
func FuzzPushRedirects(f *testing.F) {
	// The clock of a.do is at 08:01:00 for the first request.
	f.Add([]byte(`{"dispatcher":"d1.example.org","time":"2027-01-15T08:01:00Z","members":{"fra1":12.5}}`))
	f.Add([]byte(`{"dispatcher":"d1.example.org","time":"2027-01-15T08:01:00Z","members":{}}`))
	f.Add([]byte(`{"dispatcher":"d1.example.org","time":"2027-01-15T08:00:00Z","members":{"nosuch":1}}`))
	f.Add([]byte(`{"dispatcher":"","time":"0001-01-01T00:00:00Z","members":{"fra1":-1}}`))
	a := newFuzzAPI(f)
	push := api.PushRedirects.Path(fuzzGroup)
	f.Fuzz(func(t *testing.T, body []byte) {
		a.reset(t)
		code, out := a.do(t, http.MethodPost, push, body)
		wantStatus(t, "redirect report", code, out, http.StatusAccepted, http.StatusBadRequest, http.StatusNotFound)
		var rep api.RedirectReport
		why := decodeStrict(body, &rep)
		if why == nil {
			why = rep.Validate()
		}
		if why == nil {
			why = probe.Report{Time: rep.Time}.CheckTime(a.now, probe.DefaultReportMaxSkew, probe.DefaultReportMaxAge)
		}
		if (code == http.StatusBadRequest) != (why != nil) {
			t.Fatalf("%d (%s) for a report refused for: %v", code, out, why)
		}
		if code == http.StatusBadRequest {
			return
		}
		strangers := 0
		for name := range rep.Members {
			if name != "fra1" {
				strangers++
			}
		}
		if (code == http.StatusNotFound) != (strangers > 0) {
			t.Fatalf("%d (%s) for a valid report naming %d members the group does not have", code, out, strangers)
		}
		if code == http.StatusNotFound {
			return
		}
		canon, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var rep2 api.RedirectReport
		if err := decodeStrict(canon, &rep2); err != nil {
			t.Fatalf("re-decoding %s: %v", canon, err)
		}
		if !rep2.Time.Equal(rep.Time) || rep2.Dispatcher != rep.Dispatcher || !reflect.DeepEqual(rep2.Members, rep.Members) {
			t.Fatalf("round trip changed %+v to %+v", rep, rep2)
		}
		// Posted again a minute later (the clock of a.do): the same
		// report, taken, unless it has grown too old.
		code, out = a.do(t, http.MethodPost, push, canon)
		if (probe.Report{Time: rep.Time}).CheckTime(a.now, probe.DefaultReportMaxSkew, probe.DefaultReportMaxAge) != nil {
			wantStatus(t, "the re-encoded report, now too old", code, out, http.StatusBadRequest)
		} else {
			wantStatus(t, "the re-encoded report", code, out, http.StatusAccepted)
		}
	})
}

// fuzzCapacity is the static member fra1's capacity in testenv.Config.
const fuzzCapacity = 1000

// FuzzPushLoad posts LOAD-INFORM bodies for the static member fra1
// through probe.DecodeReport and the watcher. A body is answered 202 or
// 400 (413 only above MaxBody), never 500; 202 exactly when it decodes
// into a report for this group and member whose time is within the
// watcher's window of the clock and whose load is within the bound of
// fra1's capacity. The seed corpus is in
// testdata/fuzz/FuzzPushLoad.
func FuzzPushLoad(f *testing.F) {
	f.Add([]byte(`{"group":"www.example.org.","member":"fra1","seq":1,"time":"2027-01-15T08:00:00Z","r":12.34,"m":0.5,"conns":3,"bytes_per_second":0,"redirects_per_second":0,"load":128.4,"capacity":1000}`))
	f.Add([]byte(`{"group":"WWW.example.org","member":"fra1","seq":2,"time":"2027-01-15T08:00:01Z","r":0,"m":0,"conns":0,"bytes_per_second":0,"redirects_per_second":0,"load":0,"capacity":1000}`))
	f.Add([]byte(`{"group":"www.example.org.","member":"ams1","seq":1,"time":"2027-01-15T08:00:00Z","r":1,"m":0,"conns":1,"bytes_per_second":0,"redirects_per_second":0,"load":10,"capacity":1000}`))
	a := newFuzzAPI(f)
	push := api.PushLoad.Path(fuzzGroup, "fra1")
	f.Fuzz(func(t *testing.T, body []byte) {
		a.reset(t)
		code, out := a.do(t, http.MethodPost, push, body)
		if len(body) > MaxBody {
			wantStatus(t, "LOAD-INFORM", code, out, http.StatusRequestEntityTooLarge)
			return
		}
		wantStatus(t, "LOAD-INFORM", code, out, http.StatusAccepted, http.StatusBadRequest)
		rep, err := probe.DecodeReport(bytes.NewReader(body), MaxBody)
		ours := err == nil && dns.CanonicalName(rep.Group) == fuzzGroup && rep.Member == "fra1"
		believed := ours
		var why error
		if ours {
			// The watcher believes a report of fra1 within the clock's
			// window and the load bound of fra1's capacity (1000);
			// nothing came before it, so it can not be out of order.
			if why = rep.CheckTime(a.now, probe.DefaultReportMaxSkew, probe.DefaultReportMaxAge); why == nil {
				why = rep.CheckLoad(fuzzCapacity)
			}
			believed = why == nil
		}
		if believed != (code == http.StatusAccepted) {
			t.Fatalf("status %d (%s) for a report that decodes: %v (err %v), is fra1's: %v, believable: %v (%v)",
				code, out, err == nil, err, ours, believed, why)
		}
	})
}
