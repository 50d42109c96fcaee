package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// The NS set (issue 16): three dnsd processes that share their run-time
// membership, drains and pushed reports through a real etcd on loopback.

const nssetGroup = "www.example.test"

// nsset is an etcd and the dnsd nodes of one NS set.
type nsset struct {
	etcd  *etcdtest.Server
	dirs  []string
	nodes []*dnsdProc
}

// startNSSet starts etcd and n dnsd nodes (ns1…nsN) that share it.
func startNSSet(t *testing.T, n int) *nsset {
	t.Helper()
	return startNSSetWith(t, n, nil)
}

// startNSSetWith is startNSSet with more of each node's config: node(i)
// (i from 1) gives lines appended to the cluster block (indented by two)
// and members appended to the group's (indented by six).
func startNSSetWith(t *testing.T, n int, node func(i int) (cluster, members string)) *nsset {
	t.Helper()
	s := &nsset{etcd: etcdtest.Start(t)}
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		var cluster, members string
		if node != nil {
			cluster, members = node(i)
		}
		dir := t.TempDir()
		writeFile(t, dir, "example.test.zone", string(zone))
		cfg := writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e NS set node %[1]d
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
state_file: state.json
server: {identity: ns%[1]d.example.test, nsid: ns%[1]d}
health: {interval: 300ms, timeout: 250ms, jitter: 30ms}
cluster:
  node: ns%[1]d
  etcd: {endpoints: ["%[2]s"], prefix: /e2e-nsset/, request_timeout: 2s, dial_timeout: 3s, lease_ttl: 3s}
%[5]szones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %[3]s.
    ttl: {min: 1, max: 1}
    answers: 8
    secret: %[4]s
    allow_private: true # run-time members on loopback
    max_runtime_members: 120
    members:
      - {name: static1, host: static1.example.test., addresses: [127.0.10.1], capacity: 1000}
%[6]s`, i, s.etcd.Endpoint(), nssetGroup, faultSecret, cluster, members))
		s.dirs = append(s.dirs, dir)
		s.nodes = append(s.nodes, startDNSD(t, true, "-config", cfg))
	}
	return s
}

// client is a signed admin API client of node i.
func (s *nsset) client(t *testing.T, i int) *api.Client {
	t.Helper()
	c, err := api.NewClient("http://"+s.nodes[i].Admin, api.ClientOptions{Secret: []byte(faultSecret)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// answers is the set of A addresses that node d answers the group with
// (dig, over UDP), or why there is none.
func nssetAnswers(t *testing.T, d *dnsdProc) ([]string, string) {
	r := d.Dig(t, nssetGroup+".", "A")
	if r.Status != "NOERROR" {
		return nil, fmt.Sprintf("status %q:\n%s", r.Status, r.Raw)
	}
	var out []string
	for _, a := range r.Answer {
		if a.Type == "A" {
			out = append(out, a.Data)
		}
	}
	slices.Sort(out)
	return out, ""
}

// degraded reads transmirror_dnsd_cluster_degraded of node d.
func degraded(d *dnsdProc) (float64, error) {
	return metric(d.Admin, "transmirror_dnsd_cluster_degraded")
}

// waitAnswered waits until every node in nodes answers with addr (or,
// with want false, without it) and returns how long that took.
func waitAnswered(t *testing.T, nodes []*dnsdProc, addr string, want bool, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	probetest.Until(t, within, func() string {
		for i, d := range nodes {
			got, why := nssetAnswers(t, d)
			if why != "" {
				return fmt.Sprintf("node %d: %s", i+1, why)
			}
			if slices.Contains(got, addr) != want {
				return fmt.Sprintf("node %d answers %v; want %s in it: %v", i+1, got, addr, want)
			}
		}
		return ""
	})
	return time.Since(start)
}

// waitDegraded waits until every node of nodes says degraded (1) or not (0).
func waitDegraded(t *testing.T, nodes []*dnsdProc, want float64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	probetest.Until(t, within, func() string {
		for i, d := range nodes {
			v, err := degraded(d)
			if err != nil {
				return fmt.Sprintf("node %d: %v", i+1, err)
			}
			if v != want {
				return fmt.Sprintf("node %d: degraded %g, want %g", i+1, v, want)
			}
		}
		return ""
	})
	return time.Since(start)
}

func nssetAdd(t *testing.T, d *dnsdProc, name, ip string) (string, error) {
	t.Helper()
	return groupctl(t, d.Admin, faultSecret, "add", nssetGroup, "-name", name, "-host", name+".mirrors.example.test",
		"-addr", ip, "-capacity", "1000", "-lat", "50.11", "-lon", "8.68", "-country", "DE")
}

// TestNSSet: a GROUP-ADD sent to one node is answered by all three within
// 2 s; each node says who it is (NSID, CH TXT id.server); a report pushed
// to one is that node's alone (live data is not relayed through etcd); with etcd killed all three go on
// answering and taking pushes and refuse membership changes with 503;
// with etcd back they converge; a killed node leaves the other two
// unaffected.
func TestNSSet(t *testing.T) {
	t.Parallel()
	s := startNSSet(t, 3)
	all := s.nodes
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	// Identity: each node says which it is.
	for i, d := range all {
		want := fmt.Sprintf("ns%d.example.test", i+1)
		if r := d.Dig(t, "id.server.", "TXT", "CH"); len(r.Answer) != 1 || r.Answer[0].Data != `"`+want+`"` {
			t.Errorf("node %d: CH TXT id.server = %v, want %q", i+1, r.Answer, want)
		}
		if r := d.Dig(t, nssetGroup+".", "A", "+nsid"); r.EDNS == nil || !strings.Contains(r.EDNS.Options["NSID"], fmt.Sprintf("ns%d", i+1)) {
			t.Errorf("node %d: NSID option %v, want ns%d", i+1, r.EDNS, i+1)
		}
	}

	// One add, on node 1, answered by all three.
	start := time.Now()
	if out, err := nssetAdd(t, all[0], "fra1", "127.0.20.1"); err != nil {
		t.Fatalf("groupctl add: %v\n%s", err, out)
	}
	took := waitAnswered(t, all, "127.0.20.1", true, 2*time.Second)
	t.Logf("add on ns1 answered by all three %v after groupctl returned (%v after it started)", took, time.Since(start))

	// A drain on node 2 leaves every node's answers.
	if out, err := groupctl(t, all[1].Admin, faultSecret, "drain", nssetGroup, "fra1"); err != nil {
		t.Fatalf("groupctl drain: %v\n%s", err, out)
	}
	t.Logf("drain on ns2 out of all three's answers in %v", waitAnswered(t, all, "127.0.20.1", false, 2*time.Second))
	if out, err := groupctl(t, all[2].Admin, faultSecret, "undrain", nssetGroup, "fra1"); err != nil {
		t.Fatalf("groupctl undrain: %v\n%s", err, out)
	}
	waitAnswered(t, all, "127.0.20.1", true, 2*time.Second)

	// A report is live data: a mirror pushes it to every node (push:
	// all), and no node relays it to another through etcd. (push1 has no
	// probe URL: once it has pushed, it is down when its pushes stop.)
	if out, err := nssetAdd(t, all[0], "push1", "127.0.21.1"); err != nil {
		t.Fatalf("groupctl add: %v\n%s", err, out)
	}
	push := func(i int, load float64) error {
		return s.client(t, i).PushLoad(ctx, probe.Report{Group: nssetGroup + ".", Member: "push1", Seq: uint64(load),
			Time: time.Now(), R: load / 10, Load: load, Capacity: 1000})
	}
	lastLoad := func(i int) (float64, string) {
		v, err := s.client(t, i).Group(ctx, nssetGroup)
		if err != nil {
			return 0, err.Error()
		}
		for _, m := range v.Members {
			if m.Name == "push1" && m.LastReport != nil {
				return m.LastReport.Load, ""
			}
		}
		return 0, fmt.Sprintf("ns%d has no report of push1: %+v", i+1, v.Members)
	}
	probetest.Until(t, 2*time.Second, func() string { // ns3 has push1 once the add reached it through etcd
		if err := push(2, 410); err != nil {
			return err.Error()
		}
		return ""
	})
	if err := push(0, 420); err != nil {
		t.Fatalf("push to ns1: %v", err)
	}
	if got, why := lastLoad(0); why != "" || got != 420 {
		t.Errorf("ns1's report of push1: %v %s, want the 420 pushed to it", got, why)
	}
	if got, why := lastLoad(2); why != "" || got != 410 {
		t.Errorf("ns3's report of push1: %v %s, want the 410 pushed to it, not ns1's copy", got, why)
	}

	// etcd killed: every node degraded, answering, taking pushes; a
	// membership change is refused with 503.
	s.etcd.Kill()
	t.Logf("etcd killed: all three degraded in %v", waitDegraded(t, all, 1, 5*time.Second))
	for i, d := range all {
		if got, why := nssetAnswers(t, d); why != "" || !slices.Contains(got, "127.0.20.1") {
			t.Errorf("node %d without etcd answers %v (%s), want fra1's 127.0.20.1 in it", i+1, got, why)
		}
		if err := push(i, float64(500+i)); err != nil {
			t.Errorf("node %d without etcd: push: %v", i+1, err)
		}
	}
	var dash struct {
		Cluster *struct {
			Node     string   `json:"node"`
			Degraded bool     `json:"degraded"`
			Nodes    []string `json:"nodes"`
		} `json:"cluster"`
	}
	if resp, err := http.Get("http://" + all[1].Admin + "/v1/dashboard"); err != nil {
		t.Error(err)
	} else {
		err := jsonDecode(resp.Body, &dash)
		resp.Body.Close()
		if err != nil || dash.Cluster == nil || dash.Cluster.Node != "ns2" || !dash.Cluster.Degraded || len(dash.Cluster.Nodes) != 3 {
			t.Errorf("ns2's dashboard without etcd: %+v (%v), want node ns2, degraded, the three nodes last seen", dash.Cluster, err)
		}
	}
	out, err := nssetAdd(t, all[1], "fra2", "127.0.20.2")
	if err == nil || !strings.Contains(out, "503") || !strings.Contains(out, "cluster store unavailable") {
		t.Errorf("add without etcd: %v\n%s\nwant a 503 saying the cluster store is unavailable", err, out)
	}
	t.Logf("add without etcd refused: %s", strings.TrimSpace(out))

	// etcd back: connected again, and a change made on node 2 reaches all.
	restart := time.Now()
	s.etcd.Restart()
	t.Logf("etcd restarted in %v; all three connected %v later", time.Since(restart), waitDegraded(t, all, 0, 10*time.Second))
	if out, err := nssetAdd(t, all[1], "fra2", "127.0.20.2"); err != nil {
		t.Fatalf("groupctl add after etcd came back: %v\n%s", err, out)
	}
	waitAnswered(t, all, "127.0.20.2", true, 2*time.Second)
	t.Logf("converged %v after etcd's restart began", time.Since(restart))

	// One node killed: the other two unaffected.
	all[2].Stop()
	if out, err := nssetAdd(t, all[0], "fra3", "127.0.20.3"); err != nil {
		t.Fatalf("groupctl add with ns3 down: %v\n%s", err, out)
	}
	waitAnswered(t, all[:2], "127.0.20.3", true, 2*time.Second)
	for _, addr := range []string{"127.0.10.1", "127.0.20.1", "127.0.20.2"} {
		waitAnswered(t, all[:2], addr, true, time.Second)
	}
}

// TestNSSetConcurrentAdds: 100 GROUP-ADDs at once, spread over the three
// nodes: every one is answered 201 and all 100 are members on every node.
func TestNSSetConcurrentAdds(t *testing.T) {
	t.Parallel()
	s := startNSSet(t, 3)
	waitDegraded(t, s.nodes, 0, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	const n = 100
	clients := []*api.Client{s.client(t, 0), s.client(t, 1), s.client(t, 2)}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("m%03d", i)
			_, err := clients[i%3].AddMember(ctx, nssetGroup, api.MemberInfo{Name: name, Host: name + ".mirrors.example.test.",
				Addresses: []string{fmt.Sprintf("127.0.%d.%d", 30+i/200, 1+i%200)}, Capacity: 1000})
			if err != nil {
				errs <- fmt.Errorf("add %s on ns%d: %w", name, i%3+1, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	added := time.Since(start)
	probetest.Until(t, 10*time.Second, func() string {
		for i, c := range clients {
			v, err := c.Group(ctx, nssetGroup)
			if err != nil {
				return err.Error()
			}
			got := 0
			for _, m := range v.Members {
				if m.Source == "runtime" {
					got++
				}
			}
			if got != n {
				return fmt.Sprintf("ns%d has %d run-time members, want %d", i+1, got, n)
			}
		}
		return ""
	})
	t.Logf("%d concurrent adds over 3 nodes: all answered in %v, all %d on every node %v after the first was sent", n, added, n, time.Since(start))
}
