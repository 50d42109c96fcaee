package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/transmirror/transmirror/dnsd/cluster"
	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/zones"
)

// node is one dnsd's member registry on a shared etcd: a Controller with
// a cluster Store, the store's session running until the test ends (or
// stop).
type node struct {
	ctl    *members.Controller
	store  *cluster.Store
	disp   *dispatch.Dispatcher
	reg    *prometheus.Registry
	health *served
	stop   func()
}

// served records the states a Store gives its dispatcher.
type served struct {
	mu sync.Mutex
	st map[string]probe.State // "group/member"
}

func (s *served) Observe(u probe.Update) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st[u.Group+"/"+u.Member] = u.State
}

func (s *served) state(group, member string) probe.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st[group+"/"+member]
}

func startNode(t *testing.T, dir, name, endpoint string) *node {
	t.Helper()
	return startNodeWith(t, dir, name, endpoint, "", nil)
}

// startNodeWith is startNode with more of the cluster block (indented
// lines after etcd), and the pending load shared through sharer(the
// node's dispatcher) (nil: the dispatcher itself).
func startNodeWith(t *testing.T, dir, name, endpoint, extra string, sharer func(*dispatch.Dispatcher) cluster.PendingSharer) *node {
	t.Helper()
	cfg := strings.Replace(testenv.Config(""), "groups:", fmt.Sprintf(`cluster:
  node: %s
  etcd: {endpoints: [%q], prefix: /test/, request_timeout: 500ms, dial_timeout: 500ms, lease_ttl: 2s}
%sgroups:`, name, endpoint, extra), 1)
	cfg = strings.Replace(cfg, "allow_private: true", "allow_private: true\n    max_runtime_members: 120", 1)
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), []byte(testenv.Zone), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := &node{reg: prometheus.NewRegistry(), health: &served{st: map[string]probe.State{}}}
	disp, err := dispatch.New(dispatch.Options{Registry: n.reg, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	n.disp = disp
	var share cluster.PendingSharer = disp
	if sharer != nil {
		share = sharer(disp)
	}
	if n.store, err = cluster.New(cluster.Options{Config: set.Config.Cluster, Registry: n.reg,
		Logger: testenv.DiscardLogger(), Cache: members.NewFileStore(set.StateFile), Health: n.health, Pending: share}); err != nil {
		t.Fatal(err)
	}
	if n.ctl, err = members.New(members.Options{Registry: n.reg, Answers: disp, Server: testenv.Server(t, n.reg, disp),
		Store: n.store}); err != nil {
		t.Fatal(err)
	}
	if err := n.ctl.Load(set); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = n.store.Run(ctx, n.ctl) }()
	var once sync.Once
	n.stop = func() { once.Do(func() { cancel(); <-done; n.store.Close() }) }
	t.Cleanup(n.stop)
	if problems, err := promlint.NewWithMetricFamilies(testenv.Gather(t, n.reg)).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
	return n
}

func (n *node) runtime() map[string]bool {
	out := map[string]bool{}
	for _, m := range n.ctl.Current().Group("www.example.org.").Members {
		if m.Runtime {
			out[m.Name] = true
		}
	}
	return out
}

func info(name string, i int) api.MemberInfo {
	return api.MemberInfo{Name: name, Host: name + ".example.org.", Addresses: []string{fmt.Sprintf("10.9.%d.%d", i/250, 1+i%250)}, Capacity: 100}
}

// TestConcurrentChanges: two nodes add members and drain them at once;
// none is lost (the losers of each race are made again on the newer
// state), and both nodes serve the same state.
func TestConcurrentChanges(t *testing.T) {
	etcd := etcdtest.Start(t)
	a := startNode(t, t.TempDir(), "a", etcd.Endpoint())
	b := startNode(t, t.TempDir(), "b", etcd.Endpoint())
	nodes := []*node{a, b}
	const n = 60
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			nd, name := nodes[i%2], fmt.Sprintf("m%02d", i)
			if _, err := nd.ctl.Add("www.example.org", info(name, i)); err != nil {
				t.Errorf("add %s: %v", name, err)
				return
			}
			if i%3 == 0 { // drained on the other node
				if err := nodes[(i+1)%2].ctl.Drain("www.example.org", name, true); err != nil && !errors.Is(err, dispatch.ErrUnknownMember) {
					t.Errorf("drain %s: %v", name, err)
				}
			}
		})
	}
	wg.Wait()
	probetest.Until(t, 5*time.Second, func() string {
		if na, nb := len(a.runtime()), len(b.runtime()); na != n || nb != n {
			return fmt.Sprintf("both nodes with every member: a has %d, b %d of %d", na, nb, n)
		}
		return ""
	})
	conflicts := counter(t, a.reg, "transmirror_dnsd_cluster_conflicts_total") + counter(t, b.reg, "transmirror_dnsd_cluster_conflicts_total")
	t.Logf("%d adds over 2 nodes: %g races lost and made again", n, conflicts)
	if err := a.ctl.Remove("www.example.org", "m01"); err != nil {
		t.Fatal(err)
	}
	probetest.Until(t, 2*time.Second, func() string {
		if b.runtime()["m01"] {
			return "m01 gone from b: still there"
		}
		return ""
	})
}

// counter is the value of the registered counter named name.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	for _, mf := range testenv.Gather(t, reg) {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestDegraded: a node started while etcd is away serves its local copy
// of the shared state and refuses changes; once etcd is back it connects
// and takes changes again.
func TestDegraded(t *testing.T) {
	etcd := etcdtest.Start(t)
	dir := t.TempDir()
	a := startNode(t, dir, "a", etcd.Endpoint())
	if _, err := a.ctl.Add("www.example.org", info("kept", 1)); err != nil {
		t.Fatal(err)
	}
	a.stop()
	etcd.Stop()

	again := startNode(t, dir, "a", etcd.Endpoint())
	if !again.runtime()["kept"] {
		t.Fatalf("started without etcd: run-time members %v, want kept from the local copy", again.runtime())
	}
	if st := again.store.Status(); !st.Degraded {
		t.Errorf("status %+v, want degraded", st)
	}
	if _, err := again.ctl.Add("www.example.org", info("refused", 2)); !errors.Is(err, members.ErrStoreUnavailable) {
		t.Errorf("add while degraded = %v, want ErrStoreUnavailable", err)
	}
	etcd.Restart()
	probetest.Until(t, 10*time.Second, func() string {
		if again.store.Status().Degraded {
			return "connected again: still degraded"
		}
		return ""
	})
	if _, err := again.ctl.Add("www.example.org", info("later", 3)); err != nil {
		t.Fatalf("add after etcd came back: %v", err)
	}
	if got := again.runtime(); !got["kept"] || !got["later"] || got["refused"] {
		t.Errorf("run-time members %v, want kept and later", got)
	}
	if st := again.store.Status(); len(st.Nodes) != 1 || st.Nodes[0].Node != "a" {
		t.Errorf("nodes %+v, want a", st.Nodes)
	}
}

// TestQuorum: with quorum on, a member one node sees down and another up
// stays up on both; seen down by both it is down on both; the votes of a
// node whose lease expires go with it; without etcd each node serves its
// own view.
func TestQuorum(t *testing.T) {
	etcd := etcdtest.Start(t)
	const group = "www.example.org."
	q := "  quorum: {enabled: true, down_share: 0.5}\n"
	a := startNodeWith(t, t.TempDir(), "a", etcd.Endpoint(), q, nil)
	b := startNodeWith(t, t.TempDir(), "b", etcd.Endpoint(), q, nil)
	nodes := []*node{a, b}
	probetest.Until(t, 5*time.Second, func() string {
		for i, n := range nodes {
			if st := n.store.Status(); st.Degraded || len(st.Nodes) != 2 {
				return fmt.Sprintf("both nodes connected, each seeing both: node %d degraded %t, seeing %d", i, st.Degraded, len(st.Nodes))
			}
		}
		return ""
	})
	observe := func(n *node, member string, st probe.State) {
		n.store.Observe(probe.Update{Group: group, Member: member, State: st})
	}
	waitAll := func(what, member string, want probe.State, on ...*node) {
		t.Helper()
		probetest.Until(t, 5*time.Second, func() string {
			for i, n := range on {
				if got := n.health.state(group, member); got != want {
					return fmt.Sprintf("%s: node %d has %s", what, i, got)
				}
			}
			return ""
		})
	}

	observe(a, "m1", probe.StateDown)
	observe(b, "m1", probe.StateUp)
	waitAll("m1 up on both (one of two sees it down)", "m1", probe.StateUp, a, b)
	observe(b, "m1", probe.StateDown)
	waitAll("m1 down on both (both see it down)", "m1", probe.StateDown, a, b)
	observe(a, "m1", probe.StateUp)
	waitAll("m1 up again on both", "m1", probe.StateUp, a, b)

	// A third node, c, sees m2 down with a: two of three. Its lease is not
	// kept alive, so it expires.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"/test/nodes/c": `{"node":"c"}`, "/test/health/c/" + group + "/m2": "down"} {
		if _, err := cli.Put(ctx, k, v, clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	observe(a, "m2", probe.StateDown)
	observe(b, "m2", probe.StateUp)
	waitAll("m2 down on both (two of three see it down)", "m2", probe.StateDown, a, b)
	if got := downVotes(t, a.reg); got["m2"] != 2 || got["m1"] != 1 {
		t.Errorf("a's down votes %v, want m1 1 (b), m2 2 (a, c)", got)
	}
	st := a.store.Status()
	want := []cluster.MemberVotes{{Group: group, Member: "m1", Down: 1, Live: 3, DownBy: []string{"b"}},
		{Group: group, Member: "m2", Down: 2, Live: 3, DownBy: []string{"a", "c"}}}
	if !st.Quorum || st.DownShare != 0.5 || fmt.Sprint(st.Votes) != fmt.Sprint(want) {
		t.Errorf("a's status: quorum %v, down_share %g, votes %v; want on, 0.5, %v", st.Quorum, st.DownShare, st.Votes, want)
	}
	probetest.Until(t, 10*time.Second, func() string {
		if n := len(a.store.Status().Nodes); n != 2 {
			return fmt.Sprintf("c's lease expired: a sees %d nodes", n)
		}
		return ""
	})
	waitAll("m2 up on both (c's vote gone with its lease)", "m2", probe.StateUp, a, b)

	// a stops watching m1: its view leaves etcd, its series its registry.
	a.store.Forget(group, "m1")
	probetest.Until(t, 5*time.Second, func() string {
		resp, err := cli.Get(ctx, "/test/health/a/"+group+"/m1")
		if err != nil {
			return "a's view of m1 gone from etcd: " + err.Error()
		}
		if len(resp.Kvs) != 0 {
			return "a's view of m1 gone from etcd: still there"
		}
		return ""
	})
	if got := downVotes(t, a.reg); len(got) != 1 {
		t.Errorf("a's down votes %v after forgetting m1, want m2 only", got)
	}

	etcd.Stop()
	probetest.Until(t, 10*time.Second, func() string {
		if da, db := a.store.Status().Degraded, b.store.Status().Degraded; !da || !db {
			return fmt.Sprintf("both nodes degraded: a %t, b %t", da, db)
		}
		return ""
	})

	waitAll("without etcd, a serves its own view of m2", "m2", probe.StateDown, a)
	waitAll("without etcd, b serves its own view of m2", "m2", probe.StateUp, b)
}

// downVotes is transmirror_dnsd_cluster_member_down_votes by member.
func downVotes(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, mf := range testenv.Gather(t, reg) {
		if mf.GetName() != "transmirror_dnsd_cluster_member_down_votes" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "member" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}
