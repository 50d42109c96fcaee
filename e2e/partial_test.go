package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// partialNet is the addresses of TestPartialMirrors' mirrors: a, b, c at
// .1, .2, .3, all on one port.
const partialNet = "127.0.74"

// partialMember is a mirror of TestPartialMirrors.
type partialMember struct {
	name, ip, admin, root string
	proc                  *proc
}

func (m *partialMember) host() string { return m.name + ".mirrors.example.test" }

// partialCluster is dnsd and the three mirrors.
type partialCluster struct {
	dnsd    *dnsdProc
	port    string
	members []*partialMember
	hc      *http.Client // dials the address it is given; follows nothing
}

// partialAt is the time of the files that every mirror holds the same.
var partialAt = time.Now().Add(-24 * time.Hour).Truncate(time.Second)

// TestPartialMirrors: one dnsd with a group of three real mirrors that
// differ, each with content.index and a trace file: a holds the whole
// tree; b lacks the directory pool/extra; c's trace is 2 h old (max_lag
// 1h), and it holds an older copy of pool/main/changed.deb. c leaves the
// DNS answers. A request on the group name for a file that only a and c
// hold is answered by a, at once or after one redirect from b, never by
// b; a request for the changed file on c goes to a holder of the new
// copy; a file nobody holds is a 404 without a redirect; on a member's
// own name there is no redirect; ?mirrorlist on any of them names the
// holders of the best copy. Then a rolling sync: new files land
// member by member (a or b first, c last) while TTL-honouring clients
// fetch them through the group name; every request ends in a 200 with
// the file's bytes, after at most one redirect.
func TestPartialMirrors(t *testing.T) {
	t.Parallel()
	cl := startPartialCluster(t)
	a, b, c := cl.members[0], cl.members[1], cl.members[2]
	lagWaitAnswers(t, cl.dnsd, []string{a.ip, b.ip}, []string{c.ip}, 15*time.Second)

	// b's and c's copies of the siblings' indexes may not be fetched yet:
	// wait for their first rescues, then ask for real.
	probetest.Until(t, 20*time.Second, func() string {
		if code, loc, _ := cl.get(b, faultGroup, "/pool/extra/only-ac.deb"); code != http.StatusFound {
			return fmt.Sprintf("b answered %d %q for a file it lacks, want a 302", code, loc)
		}
		if code, loc, _ := cl.get(c, faultGroup, "/pool/main/changed.deb"); code != http.StatusFound {
			return fmt.Sprintf("c answered %d %q for a file it holds an older copy of, want a 302", code, loc)
		}
		return ""
	})
	tests := []struct {
		name, path, host string
		at               *partialMember
		status           int
		to               *partialMember // the redirect's target, for 302
		body             string         // of the end of the chain
	}{
		{"held here", "/pool/extra/only-ac.deb", faultGroup, a, 200, nil, "only-ac"},
		{"lacked here: rescued by the holder in DNS", "/pool/extra/only-ac.deb", faultGroup, b, 302, a, "only-ac"},
		{"an older copy here: to the new one", "/pool/main/changed.deb", faultGroup, c, 302, nil, "changed v2"},
		{"the same copy everywhere", "/pool/main/common.deb", faultGroup, b, 200, nil, "common"},
		{"on its own name: no rescue", "/pool/extra/only-ac.deb", b.host(), b, 404, nil, ""},
		{"nobody has it", "/pool/main/nobody.deb", faultGroup, a, 404, nil, ""},
		{"nobody has it, asked where it is missing too", "/pool/extra/nobody.deb", faultGroup, b, 404, nil, ""},
		{"the mirror list where it is missing", "/pool/extra/only-ac.deb?mirrorlist", faultGroup, b, 200, nil,
			"http://a.mirrors.example.test:" + cl.port + "/pool/extra/only-ac.deb\n"},
		{"the mirror list of the changed file", "/pool/main/changed.deb?mirrorlist", b.host(), b, 200, nil,
			"http://b.mirrors.example.test:" + cl.port + "/pool/main/changed.deb\nhttp://a.mirrors.example.test:" + cl.port + "/pool/main/changed.deb\n"},
		{"no mirror list of nobody's file", "/pool/main/nobody.deb?mirrorlist", faultGroup, a, 404, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, loc, body := cl.get(tt.at, tt.host, tt.path)
			if code != tt.status {
				t.Fatalf("GET %s on %s (Host %s) = %d %q, want %d", tt.path, tt.at.name, tt.host, code, loc, tt.status)
			}
			if code != http.StatusFound {
				if code == 200 && body != tt.body && !(strings.Contains(tt.path, "?mirrorlist") && partialSameLines(body, tt.body)) {
					t.Errorf("body %q, want %q", body, tt.body)
				}
				if loc != "" {
					t.Errorf("Location %q on a %d", loc, code)
				}
				return
			}
			to, code, body, err := cl.follow(loc)
			switch {
			case err != nil:
				t.Fatal(err)
			case tt.to != nil && to != tt.to:
				t.Errorf("redirected to %s, want %s", to.name, tt.to.name)
			case to == tt.at:
				t.Errorf("redirected to itself: %s", loc)
			case code != 200 || body != tt.body:
				t.Errorf("the redirect's target %s answered %d %q, want 200 %q", to.name, code, body, tt.body)
			}
		})
	}
	cl.rollingSync(t)
}

// partialSameLines reports whether a mirror list has want's lines, the
// first one first (this mirror), the rest in any order (the policy's
// weighted draw).
func partialSameLines(got, want string) bool {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	if len(g) != len(w) || g[0] != w[0] {
		return false
	}
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// startPartialCluster writes the three trees, starts dnsd (the group
// with each mirror probed on its admin listener, answers: 2, TTL 1 s,
// max_lag 1h) and the three mirrors on one port, and waits until every
// index holds its tree and c is lagging in the view.
func startPartialCluster(t *testing.T) *partialCluster {
	t.Helper()
	dir := t.TempDir()
	cl := &partialCluster{}
	trees := map[string]map[string]string{
		"a": {"pool/main/common.deb": "common", "pool/extra/only-ac.deb": "only-ac", "pool/main/changed.deb": "changed v2"},
		"b": {"pool/main/common.deb": "common", "pool/main/changed.deb": "changed v2"},
		"c": {"pool/main/common.deb": "common", "pool/extra/only-ac.deb": "only-ac", "pool/main/changed.deb": "changed v1"},
	}
	for i, name := range []string{"a", "b", "c"} {
		m := &partialMember{name: name, ip: fmt.Sprintf("%s.%d", partialNet, i+1), admin: probetest.FreeAddr(t, "tcp"),
			root: filepath.Join(dir, name+"-root")}
		for p, body := range trees[name] {
			at := partialAt
			if p == "pool/main/changed.deb" && name != "c" {
				at = partialAt.Add(time.Hour) // the new copy
			}
			partialPut(t, m.root, p, body, at)
		}
		gen := time.Now()
		if name == "c" {
			gen = gen.Add(-2 * time.Hour)
		}
		partialPut(t, m.root, "project/trace/master", lagFormats[0](gen)+"\n", time.Now())
		cl.members = append(cl.members, m)
	}
	cl.dnsd = startDNSD(t, true, "-config", partialDNSD(t, dir, cl.members))
	cl.port, _ = onePort(t, len(cl.members), func(i int, port string) (*proc, string, error) {
		return launchPartialMirror(t, dir, cl.members[i], port, cl.dnsd.Admin)
	})
	cl.hc = &http.Client{
		Transport: &http.Transport{Proxy: nil, DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Timeout: 5 * time.Second,
	}
	t.Cleanup(cl.hc.CloseIdleConnections)
	for _, m := range cl.members {
		partialWaitIndex(t, m, func(x *content.Index) bool { return x.Len() == len(trees[m.name])+1 })
	}
	probetest.Until(t, 15*time.Second, func() string {
		st := lagView(t, cl.dnsd.Admin)
		if st["a"].State != "up" || st["b"].State != "up" || st["c"].State != "lagging" {
			return fmt.Sprintf("view %+v, want a and b up, c lagging", st)
		}
		return ""
	})
	return cl
}

// launchPartialMirror starts member m on m.ip and port ("0": any).
func launchPartialMirror(t *testing.T, dir string, m *partialMember, port, dnsdAdmin string) (*proc, string, error) {
	t.Helper()
	cfg := fmt.Sprintf(`listen: ["%s"]
admin: %s
group: %s
member: %s
host: %s
dnsd: {url: "http://%s", secret: %q, view_interval: 500ms}
root: %s
content: {index: true, trace: project/trace/master}
capacity: 1000
run_queue: none
timeouts: {shutdown: 5s}
`, net.JoinHostPort(m.ip, port), m.admin, faultGroup, m.name, m.host(), dnsdAdmin, faultSecret, m.root)
	mp, err := launchMirror(t, writeFile(t, dir, m.name+".yaml", cfg), m.name)
	if err != nil {
		return nil, "", fmt.Errorf("on %s: %w", net.JoinHostPort(m.ip, port), err)
	}
	m.proc = mp.proc
	return mp.proc, mp.HTTP, nil
}

// partialDNSD writes dnsd's config and zone for TestPartialMirrors.
func partialDNSD(t *testing.T, dir string, ms []*partialMember) string {
	t.Helper()
	zone := readFileT(t, filepath.Join("testdata", "example.test.zone"))
	var mb strings.Builder
	for _, m := range ms {
		zone += fmt.Sprintf("%s.mirrors IN A %s\n", m.name, m.ip)
		fmt.Fprintf(&mb, "      - {name: %s, host: %s., addresses: [%s], capacity: 1000, probe: \"http://%s%s\"}\n",
			m.name, m.host(), m.ip, m.admin, api.LoadReport.Path())
	}
	writeFile(t, dir, "example.test.zone", zone)
	return writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e: mirrors that differ
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: 1, max: 1}
    answers: 2
    policy: {name: weighted}
    max_lag: 1h
    secret: %s
    members:
%s`, faultGroup, faultSecret, mb.String()))
}

// partialPut writes a file of the tree whole (written aside and renamed,
// as rsync does) with modification time at.
func partialPut(t *testing.T, root, rel, body string, at time.Time) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, at, at); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// get sends GET path to m's address with the Host header host (and the
// cluster's port), and returns the status, the Location and the body.
func (cl *partialCluster) get(m *partialMember, host, path string) (int, string, string) {
	req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(m.ip, cl.port)+path, nil)
	if err != nil {
		return 0, "", err.Error()
	}
	req.Host = net.JoinHostPort(host, cl.port)
	resp, err := cl.hc.Do(req)
	if err != nil {
		return 0, "", err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// follow fetches a redirect's Location: its host must be a member's own
// name (resolved through dnsd to that member's address) on the cluster's
// port; the answer must not be another redirect.
func (cl *partialCluster) follow(loc string) (*partialMember, int, string, error) {
	u, err := url.Parse(loc)
	if err != nil {
		return nil, 0, "", err
	}
	var to *partialMember
	for _, m := range cl.members {
		if strings.EqualFold(u.Hostname(), m.host()) {
			to = m
		}
	}
	if to == nil || u.Port() != cl.port {
		return nil, 0, "", fmt.Errorf("redirect to %s: not a member's own name on port %s", loc, cl.port)
	}
	if ip, _, err := skewQueryA(cl.dnsd.Addr, to.host(), netip.Prefix{}); err != nil || ip != to.ip {
		return nil, 0, "", fmt.Errorf("dnsd resolved %s to %s (%v), want %s", to.host(), ip, err, to.ip)
	}
	code, loc2, body := cl.get(to, u.Hostname(), u.Path)
	if code == http.StatusFound {
		return to, code, body, fmt.Errorf("a second redirect, from %s to %s", to.name, loc2)
	}
	return to, code, body, nil
}

// partialResolver keeps the answer dnsd gave it for the answer's TTL, as
// a resolver does, for the clients behind it (its ECS subnet).
type partialResolver struct {
	ecs   netip.Prefix
	mu    sync.Mutex
	ip    string
	until time.Time
}

func (r *partialResolver) lookup(dnsAddr string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Now().Before(r.until) {
		return r.ip, nil
	}
	ip, ttl, err := skewQueryA(dnsAddr, faultGroup, r.ecs)
	if err != nil {
		return "", err
	}
	r.ip, r.until = ip, time.Now().Add(time.Duration(ttl)*time.Second)
	return ip, nil
}

// partialTally counts the rolling sync's requests by outcome.
type partialTally struct {
	requests, redirected, notFound, wrong, failed atomic.Int64
	mu                                            sync.Mutex
	first                                         string
}

func (y *partialTally) fail(format string, args ...any) {
	y.failed.Add(1)
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.first == "" {
		y.first = fmt.Sprintf(format, args...)
	}
}

// partialClientTick paces each client of the rolling sync: 4 clients,
// 200 requests per second in all.
const partialClientTick = 20 * time.Millisecond

// partialFile is a file that the clients of the rolling sync ask for.
type partialFile struct{ path, body string }

// rollingSync lands partialSyncFiles new files member by member (a or b
// first, by turns, then the other, then c, partialSyncStep apart) while
// four clients behind six resolvers fetch every file published so far
// through the group name. A file is published once its first holder's
// index has it: the point where a two-stage sync, packages before
// metadata, would name it. Every request must end in a 200 with the
// file's bytes after at most one redirect: no 404, no other bytes.
func (cl *partialCluster) rollingSync(t *testing.T) {
	const files, step = 8, 700 * time.Millisecond
	var mu sync.Mutex
	var published []partialFile
	pick := func(i int) (partialFile, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(published) == 0 {
			return partialFile{}, false
		}
		return published[i%len(published)], true
	}
	var resolvers []*partialResolver
	for k := range 6 {
		resolvers = append(resolvers, &partialResolver{ecs: netip.MustParsePrefix(fmt.Sprintf("203.0.113.%d/32", 10*k+1))})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var y partialTally
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() { cl.syncClient(ctx, c, resolvers, pick, &y) })
	}
	a, b, c := cl.members[0], cl.members[1], cl.members[2]
	for k := range files {
		order := []*partialMember{a, b, c}
		if k%2 == 1 {
			order = []*partialMember{b, a, c}
		}
		f := partialFile{path: fmt.Sprintf("/pool/new/file-%d.deb", k), body: fmt.Sprintf("new file %d", k)}
		partialPut(t, order[0].root, f.path[1:], f.body, time.Now())
		partialWaitIndexed(t, order[0], f.path[1:])
		mu.Lock()
		published = append(published, f)
		mu.Unlock()
		for _, m := range order[1:] {
			<-time.After(step) // the sync's pace, not a wait for something
			partialPut(t, m.root, f.path[1:], f.body, time.Now())
		}
	}
	<-time.After(time.Second) // the clients fetch the last file from all three
	cancel()
	wg.Wait()
	t.Logf("figures: rolling sync of %d files over 3 mirrors: %d requests, %d rescued by a 302, %d 404s, %d with other bytes, %d failed",
		files, y.requests.Load(), y.redirected.Load(), y.notFound.Load(), y.wrong.Load(), y.failed.Load())
	if y.notFound.Load() != 0 || y.wrong.Load() != 0 || y.failed.Load() != 0 {
		t.Errorf("rolling sync: %d 404s, %d with other bytes, %d failed; first: %s", y.notFound.Load(), y.wrong.Load(), y.failed.Load(), y.first)
	}
	if y.requests.Load() < 100 || y.redirected.Load() == 0 {
		t.Errorf("rolling sync: %d requests, %d redirected: too few to tell", y.requests.Load(), y.redirected.Load())
	}
}

// syncClient is client c of the rolling sync: until ctx is done it asks
// for a published file through one of the resolvers, at the address the
// resolver holds, and follows one redirect.
func (cl *partialCluster) syncClient(ctx context.Context, c int, resolvers []*partialResolver, pick func(int) (partialFile, bool), y *partialTally) {
	tick := time.NewTicker(partialClientTick)
	defer tick.Stop()
	for i := c; ; i += 4 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		f, ok := pick(i)
		if !ok {
			continue
		}
		ip, err := resolvers[i%len(resolvers)].lookup(cl.dnsd.Addr)
		if err != nil {
			y.fail("resolve: %v", err)
			continue
		}
		var at *partialMember
		for _, m := range cl.members {
			if m.ip == ip {
				at = m
			}
		}
		if at == nil {
			y.fail("dnsd answered %s, no member's address", ip)
			continue
		}
		y.requests.Add(1)
		code, loc, body := cl.get(at, faultGroup, f.path)
		from := at.name
		if code == http.StatusFound {
			y.redirected.Add(1)
			to, c2, b2, err := cl.follow(loc)
			if err != nil {
				y.fail("%s from %s: %v", f.path, from, err)
				continue
			}
			code, body, from = c2, b2, from+"→"+to.name
		}
		switch {
		case code == http.StatusNotFound:
			y.notFound.Add(1)
			y.fail("%s: 404 from %s", f.path, from)
		case code != http.StatusOK:
			y.fail("%s: %d from %s: %s", f.path, code, from, body)
		case body != f.body:
			y.wrong.Add(1)
			y.fail("%s: %q from %s, want %q", f.path, body, from, f.body)
		}
	}
}

// partialWatcher is the test's own client of the mirrors' indexes: from
// an address of its own, so that its polls spend no tokens of the
// siblings' (every mirror and dnsd fetch from 127.0.0.1).
var partialWatcher = &http.Client{
	Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 99, 1)}}).DialContext},
	Timeout:   5 * time.Second,
}

// partialWaitIndexed waits until m's content index holds rel.
func partialWaitIndexed(t *testing.T, m *partialMember, rel string) {
	t.Helper()
	partialWaitIndex(t, m, func(x *content.Index) bool { _, ok := x.Lookup(rel); return ok })
}

// partialWaitIndex waits until m's content index is as ok wants it.
func partialWaitIndex(t *testing.T, m *partialMember, ok func(*content.Index) bool) {
	t.Helper()
	probetest.Until(t, 10*time.Second, func() string {
		resp, err := partialWatcher.Get("http://" + m.admin + api.ContentIndex.Path())
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		rep := content.NewReplica(content.Limits{})
		if err := rep.Update(resp.Body); err != nil {
			return fmt.Sprintf("%s's index: %v", m.name, err)
		}
		if !ok(rep.Index()) {
			return fmt.Sprintf("%s's index is not there yet (%d files)", m.name, rep.Index().Len())
		}
		return ""
	})
}
