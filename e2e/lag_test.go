package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// lagPushInterval is the mirrors' push interval in TestLaggingMirror: the
// default (mirror.yaml's dnsd.push_interval left out).
const lagPushInterval = 2 * time.Second

// lagSlack is what TestLaggingMirror allows beyond one push interval: the
// report's way to dnsd and the test's own polling (dig is a process a
// query) on two shared cores.
const lagSlack = time.Second

// lagMember is a member of TestLaggingMirror's group and its mirror.
type lagMember struct {
	name, ip, trace string // trace: the trace file's path
	admin           string
}

// TestLaggingMirror: one dnsd with a group of three mirrors, max_lag: 1h,
// each mirror with a trace file (ftpsync's date -u, RFC 3339, a Unix
// timestamp). When c's trace goes 2 h behind the others', c leaves every
// DNS answer (state lagging in the view, member_lagging 1) within one push
// interval; when a fresh trace is written into it, it is back in every
// answer within one interval. Both times are measured and logged; each
// trace is written just after a push (the step before ends on one), so
// they are the worst case: the next push, a full interval later.
func TestLaggingMirror(t *testing.T) {
	t.Parallel()
	now := time.Now()
	d, ms := startLagCluster(t, "127.0.71", "", now, now, now)
	all := []string{ms[0].ip, ms[1].ip, ms[2].ip}
	probetest.Until(t, 3*lagPushInterval+5*time.Second, func() string {
		st := lagView(t, d.Admin)
		for _, m := range ms {
			if st[m.name].Generation.IsZero() || st[m.name].State == "lagging" {
				return fmt.Sprintf("view %+v, want every member with a generation, none lagging", st)
			}
		}
		return ""
	})
	lagWaitAnswers(t, d, all, nil, lagPushInterval+lagSlack)

	c := ms[2]
	aged := time.Now()
	lagWriteTrace(t, c.trace, lagFormats[2](aged.Add(-2*time.Hour))+"\n")
	lagWaitAnswers(t, d, all[:2], []string{c.ip}, lagPushInterval+lagSlack)
	left := time.Since(aged)
	st := lagView(t, d.Admin)
	if st["c"].State != "lagging" || st["c"].Lag < 7100 || st["c"].Lag > 7300 || st["a"].State != "up" {
		t.Errorf("view after c fell behind: %+v, want c lagging by about 7200 s", st)
	}
	if v, err := metric(d.Admin, "transmirror_dnsd_member_lagging", `member="c"`); err != nil || v != 1 {
		t.Errorf("member_lagging{member=c} = %v, %v; want 1", v, err)
	}

	synced := time.Now()
	lagWriteTrace(t, c.trace, lagFormats[2](synced)+"\n")
	lagWaitAnswers(t, d, all, nil, lagPushInterval+lagSlack)
	back := time.Since(synced)
	if v, err := metric(d.Admin, "transmirror_dnsd_member_lagging", `member="c"`); err != nil || v != 0 {
		t.Errorf("member_lagging{member=c} = %v, %v; want 0", v, err)
	}
	t.Logf("figures: c left every answer %v after its trace went 2h behind (max_lag 1h) and was back in every answer %v after a fresh trace; push interval %v, bound %v",
		left.Round(time.Millisecond), back.Round(time.Millisecond), lagPushInterval, lagPushInterval+lagSlack)
}

// TestLaggingMirrorMaster: a group with a master: the newest generation
// is the master's, 2 h ahead of every mirror, so every member lags and
// dnsd fails open to the freshest one (a), in every answer, saying so in
// the view and counting it.
func TestLaggingMirrorMaster(t *testing.T) {
	t.Parallel()
	now := time.Now()
	master := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s\nUsed ftpsync version: e2e\n", lagFormats[0](now))
	}))
	defer master.Close()
	old := now.Add(-2 * time.Hour)
	d, ms := startLagCluster(t, "127.0.72", master.URL+"/debian/project/trace/master", old, old.Add(-time.Minute), old.Add(-time.Minute))
	lagWaitAnswers(t, d, []string{ms[0].ip}, []string{ms[1].ip, ms[2].ip}, lagPushInterval+lagSlack)
	st := lagView(t, d.Admin)
	if st["a"].State == "lagging" || st["b"].State != "lagging" || st["c"].State != "lagging" || st["a"].Lag < 7100 {
		t.Errorf("view: %+v, want b and c lagging, a answered though 2 h behind the master", st)
	}
	if v, err := metric(d.Admin, "transmirror_dnsd_group_lag_fail_open_total"); err != nil || v == 0 {
		t.Errorf("group_lag_fail_open_total = %v, %v; want > 0", v, err)
	}
}

// lagFormats are the trace formats of the three mirrors: ftpsync's date
// -u, RFC 3339 and a Unix timestamp.
var lagFormats = []func(time.Time) string{
	func(t time.Time) string { return t.UTC().Format("Mon Jan _2 15:04:05 UTC 2006") },
	func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	func(t time.Time) string { return fmt.Sprint(t.Unix()) },
}

// startLagCluster starts dnsd (lagDNSD, with master unless "") and the
// three mirrors a, b, c (at net.1, net.2, net.3 in dnsd's answers), each
// with a trace file of the generation gens gives, pushing at the default
// interval, and waits until the view has every member's generation.
func startLagCluster(t *testing.T, net, master string, gens ...time.Time) (*dnsdProc, []*lagMember) {
	t.Helper()
	dir := t.TempDir()
	ms := []*lagMember{{name: "a", ip: net + ".1"}, {name: "b", ip: net + ".2"}, {name: "c", ip: net + ".3"}}
	d := startDNSD(t, true, "-config", lagDNSD(t, dir, master, ms))
	for i, m := range ms {
		root := filepath.Join(dir, m.name+"-root")
		m.trace = filepath.Join(root, "project", "trace", "master")
		if err := os.MkdirAll(filepath.Dir(m.trace), 0o755); err != nil {
			t.Fatal(err)
		}
		lagWriteTrace(t, m.trace, lagFormats[i](gens[i])+"\nUsed ftpsync version: e2e\n")
		cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s.mirrors.example.test
dnsd: {url: "http://%s", secret: %q}
root: %s
content: {trace: project/trace/master}
capacity: 1000
run_queue: none
`, faultGroup, m.name, m.name, d.Admin, faultSecret, root)
		m.admin = runMirror(t, writeFile(t, dir, m.name+".yaml", cfg), m.name).Admin
	}
	probetest.Until(t, 3*lagPushInterval+5*time.Second, func() string {
		st := lagView(t, d.Admin)
		for _, m := range ms {
			if st[m.name].Generation.IsZero() {
				return fmt.Sprintf("view %+v, want every member with a generation", st)
			}
		}
		return ""
	})
	return d, ms
}

// lagWriteTrace writes a trace file whole (a new file renamed over the
// old, as a sync that writes the trace last leaves it), so that no report
// reads it half written.
func lagWriteTrace(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// lagDNSD writes dnsd's config and zone for TestLaggingMirror into dir and
// returns the config's path: the group answers with all three members
// (weighted, answers: 3), TTL 1 s, max_lag 1h, and master when not "".
func lagDNSD(t *testing.T, dir, master string, ms []*lagMember) string {
	t.Helper()
	zone := readFileT(t, filepath.Join("testdata", "example.test.zone"))
	var mb strings.Builder
	for _, m := range ms {
		zone += fmt.Sprintf("%s.mirrors IN A %s\n", m.name, m.ip)
		fmt.Fprintf(&mb, "      - {name: %s, host: %s.mirrors.example.test., addresses: [%s], capacity: 1000}\n", m.name, m.name, m.ip)
	}
	writeFile(t, dir, "example.test.zone", zone)
	masterKey := ""
	if master != "" {
		masterKey = fmt.Sprintf("    master: %q\n", master)
	}
	return writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e: a lagging mirror leaves the answers
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: 1, max: 1}
    answers: 3
    policy: {name: weighted}
    max_lag: 1h
%s    secret: %s
    members:
%s`, faultGroup, masterKey, faultSecret, mb.String()))
}

// lagSubnets are the client subnets of lagWaitAnswers's queries, besides
// one without ECS.
var lagSubnets = []string{"198.51.100.0/24", "203.0.113.0/24", "192.0.2.0/24", "2001:db8::/48"}

// lagWaitAnswers waits, within the bound, until every one of a round of
// queries (dig, with each of lagSubnets and without ECS) answers exactly
// want's addresses and none of absent.
func lagWaitAnswers(t *testing.T, d *dnsdProc, want, absent []string, within time.Duration) {
	t.Helper()
	probetest.Until(t, within, func() string {
		for _, args := range append([][]string{{}}, lagSubnetArgs()...) {
			r := d.Dig(t, append([]string{faultGroup, "A"}, args...)...)
			var got []string
			for _, x := range r.Answer {
				got = append(got, x.Data)
			}
			slices.Sort(got)
			if r.Status != "NOERROR" || !slices.Equal(got, want) || slices.ContainsFunc(got, func(a string) bool { return slices.Contains(absent, a) }) {
				return fmt.Sprintf("dig %v: %s %v, want %v", args, r.Status, got, want)
			}
		}
		return ""
	})
}

func lagSubnetArgs() [][]string {
	var out [][]string
	for _, s := range lagSubnets {
		out = append(out, []string{"+subnet=" + s})
	}
	return out
}

// lagMemberView is a member in dnsd's group view as TestLaggingMirror
// reads it.
type lagMemberView struct {
	State      string    `json:"state"`
	Generation time.Time `json:"generation"`
	Lag        float64   `json:"lag_seconds"`
}

// lagView returns each member's state, generation and lag in dnsd's group
// view.
func lagView(t *testing.T, admin string) map[string]lagMemberView {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + admin + "/v1/groups/" + faultGroup)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Members []struct {
			Name string `json:"name"`
			lagMemberView
		} `json:"members"`
	}
	if err := jsonDecode(resp.Body, &v); err != nil {
		t.Fatal(err)
	}
	out := map[string]lagMemberView{}
	for _, m := range v.Members {
		out[m.Name] = m.lagMemberView
	}
	return out
}
