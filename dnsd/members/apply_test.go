package members_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/zones"
)

// digA asks the server at addr for the group's A records over UDP and
// returns the addresses answered, or nil when the exchange failed.
func digA(t *testing.T, addr string) map[string]bool {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	c := &dns.Client{Timeout: time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out[a.A.String()] = true
		}
	}
	return out
}

// reload writes config into the env's directory and loads it.
func (e *ctlEnv) reload(config string) error {
	e.t.Helper()
	path := filepath.Join(e.dir, "dnsd.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		e.t.Fatal(err)
	}
	set, err := zones.Load(path)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.ctl.Load(set)
}

// TestControllerReloadHealth: health.fall changed by a reload takes effect
// for the members already watched.
func TestControllerReloadHealth(t *testing.T) {
	fra := testenv.NewFakeMirror(t, "www.example.org.", "fra1")
	fra.Failing.Store(true)
	cfg := func(fall int) string {
		return strings.Replace(testenv.Config(fra.Srv.URL+"/v1/load"), "rise: 2, fall: 3", "rise: 2, fall: "+strconv.Itoa(fall), 1)
	}
	e := startCtl(t, t.TempDir(), cfg(100))
	// ams1 stays up, so that fra1 going down is not a fail-open.
	ams := testenv.NewFakeMirror(t, "www.example.org.", "ams1")
	add := `{"name":"ams1","host":"ams1.example.org.","addresses":["10.0.1.2"],"capacity":1000,"probe":"` + ams.Srv.URL + `/v1/load"}`
	if code, body := e.call("POST", "/v1/groups/www.example.org./members", []byte(add), []byte(testenv.Secret), time.Now()); code != http.StatusCreated {
		t.Fatalf("GROUP-ADD: %d %s", code, body)
	}
	// 8 failed probes with fall 100: fra1 has no verdict and is answered.
	probetest.Until(t, 10*time.Second, func() string {
		v, _ := e.ctl.View("www.example.org")
		if n := fra.Hits.Load(); n < 8 {
			return fmt.Sprintf("8 probes of fra1, ams1 up: %d probes", n)
		}
		if len(v.Members) != 2 || v.Members[1].State != "up" {
			return fmt.Sprintf("8 probes of fra1, ams1 up: members %+v", v.Members)
		}
		return ""
	})
	if !e.answered()["10.0.1.1"] {
		t.Fatal("fra1 left the answers after 8 failures with fall 100")
	}
	if err := e.reload(cfg(2)); err != nil {
		t.Fatal(err)
	}
	hits := fra.Hits.Load()
	probetest.Until(t, 10*time.Second, func() string {
		if e.answered()["10.0.1.1"] {
			return "fra1 leaves the answers with the reloaded fall 2: still answered"
		}
		return ""
	})
	if n := fra.Hits.Load() - hits; n > 3 {
		t.Errorf("fra1 left after %d more probes; fall 2 wants 2 (one more may be in flight)", n)
	}
}

// makeReadOnly makes dir refuse new files for this process and returns how
// it did it: a mode without write bits (for an unprivileged user), else the
// immutable attribute (root ignores modes); the caller's cleanup undoes it.
func makeReadOnly(t *testing.T, dir string) string {
	t.Helper()
	probeWrite := func() bool {
		f, err := os.CreateTemp(dir, "probe-*")
		if err != nil {
			return false
		}
		f.Close()
		os.Remove(f.Name())
		return true
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if !probeWrite() {
		return "mode 0555"
	}
	out, err := exec.Command("chattr", "+i", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("the state directory can not be made read-only for this user: chattr +i: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	if probeWrite() {
		t.Fatal("the state directory is still writable after chattr +i")
	}
	return "chattr +i"
}

// TestControllerPersistFailure: a membership change that can not be
// persisted (read-only state directory) is refused, and neither the answers
// nor the state file change.
func TestControllerPersistFailure(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(testenv.Config(""), "state_file: state.json", "state_file: state/state.json", 1)
	e := startCtl(t, root, cfg)
	add := func(name, addr string) (int, string) {
		body := `{"name":"` + name + `","host":"` + name + `.example.org.","addresses":["` + addr + `"],"capacity":10}`
		return e.call("POST", "/v1/groups/www.example.org./members", []byte(body), []byte(testenv.Secret), time.Now())
	}
	if code, body := add("ams1", "10.0.1.2"); code != http.StatusCreated {
		t.Fatalf("GROUP-ADD: %d %s", code, body)
	}
	statePath := filepath.Join(dir, "state.json")
	before, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	answersBefore := keys(e.answered())
	how := makeReadOnly(t, dir)
	t.Logf("state directory made read-only with %s", how)

	cases := []struct {
		name   string
		method string
		path   string
		body   string
	}{
		{"GROUP-ADD", "POST", "/v1/groups/www.example.org./members",
			`{"name":"new1","host":"new1.example.org.","addresses":["10.0.9.1"],"capacity":10}`},
		{"drain", "POST", "/v1/groups/www.example.org./members/fra1/drain", ""},
		{"GROUP-EXIT", "DELETE", "/v1/groups/www.example.org./members/ams1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.call(tc.method, tc.path, []byte(tc.body), []byte(testenv.Secret), time.Now())
			if code < 500 {
				t.Errorf("%s with a read-only state directory: %d %s, want a 5xx", tc.name, code, body)
			}
			if got := keys(e.answered()); strings.Join(got, ",") != strings.Join(answersBefore, ",") {
				t.Errorf("answers %v after a refused %s, want %v", got, tc.name, answersBefore)
			}
			if got := keys(digA(t, e.dns)); strings.Join(got, ",") != strings.Join(answersBefore, ",") {
				t.Errorf("DNS answers %v after a refused %s, want %v", got, tc.name, answersBefore)
			}
			after, err := os.ReadFile(statePath)
			if err != nil || !bytes.Equal(after, before) {
				t.Errorf("state file changed by a refused %s (err %v)", tc.name, err)
			}
			v, _ := e.ctl.View("www.example.org")
			if len(v.Members) != 2 {
				t.Errorf("view has %d members after a refused %s, want 2", len(v.Members), tc.name)
			}
		})
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestTimeToAnswer measures how long a probe's state change, and a drain
// through the admin API, take to reach the first DNS answer over UDP that
// reflects them. Both travel as events: no loop polls for them.
func TestTimeToAnswer(t *testing.T) {
	fra := testenv.NewFakeMirror(t, "www.example.org.", "fra1")
	e := startCtl(t, t.TempDir(), testenv.Config(fra.Srv.URL+"/v1/load"))
	ams := testenv.NewFakeMirror(t, "www.example.org.", "ams1")
	add := `{"name":"ams1","host":"ams1.example.org.","addresses":["10.0.1.2"],"capacity":1000,"probe":"` + ams.Srv.URL + `/v1/load"}`
	if code, body := e.call("POST", "/v1/groups/www.example.org./members", []byte(add), []byte(testenv.Secret), time.Now()); code != http.StatusCreated {
		t.Fatalf("GROUP-ADD: %d %s", code, body)
	}
	probetest.Until(t, 10*time.Second, func() string {
		if a := digA(t, e.dns); !a["10.0.1.1"] || !a["10.0.1.2"] {
			return fmt.Sprintf("both members up and answered: answered %v", a)
		}
		return ""
	})

	// firstWithout polls DNS until an answer leaves addr out, and returns
	// when that answer arrived.
	firstWithout := func(addr string) time.Time {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if a := digA(t, e.dns); a != nil && !a[addr] {
				return time.Now()
			}
		}
		t.Fatalf("%s still answered after 10s", addr)
		return time.Time{}
	}
	const bound = time.Second // generous: the path has no timer in it

	t.Run("probe state change", func(t *testing.T) {
		fra.Failing.Store(true)
		seen := firstWithout("10.0.1.1")
		st, ok := e.watch.State("www.example.org.", "fra1")
		if !ok || st.State.String() != "down" {
			t.Fatalf("fra1 left the answers but is %v", st.State)
		}
		took := seen.Sub(st.LastChange)
		t.Logf("probe state change → first DNS answer without fra1: %v", took)
		if took > bound {
			t.Errorf("took %v, want under %v", took, bound)
		}
		fra.Failing.Store(false)
		probetest.Until(t, 10*time.Second, func() string {
			if a := digA(t, e.dns); !a["10.0.1.1"] {
				return fmt.Sprintf("fra1 back: answered %v", a)
			}
			return ""
		})

	})
	t.Run("drain API call", func(t *testing.T) {
		start := time.Now()
		if code, body := e.call("POST", "/v1/groups/www.example.org./members/ams1/drain", []byte{}, []byte(testenv.Secret), start); code != http.StatusOK {
			t.Fatalf("drain: %d %s", code, body)
		}
		returned := time.Now()
		seen := firstWithout("10.0.1.2")
		t.Logf("drain call → first DNS answer without ams1: %v (the call itself took %v)", seen.Sub(start), returned.Sub(start))
		if took := seen.Sub(start); took > bound {
			t.Errorf("took %v, want under %v", took, bound)
		}
		if a := digA(t, e.dns); a["10.0.1.2"] {
			t.Error("ams1 answered again after its drain")
		}
	})
}
