package cluster_test

import (
	"fmt"
	"maps"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/cluster"
	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/probe/probetest"
)

// setPending is a PendingSharer whose own pending load the test sets, and
// that hands the others' to a real dispatcher.
type setPending struct {
	*dispatch.Dispatcher
	mu    sync.Mutex
	local map[string]map[string]dispatch.FamilyPending
}

func (p *setPending) LocalPending() map[string]map[string]dispatch.FamilyPending {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.local)
}

func (p *setPending) set(members map[string]dispatch.FamilyPending) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.local = map[string]map[string]dispatch.FamilyPending{"www.example.org.": members}
}

// TestSharedPending: the pending load of one node's answers reaches the
// other node's picks through etcd within a few share intervals, follows
// its changes, goes while etcd is away and comes back with it, and goes
// when the node stops (its lease with it).
func TestSharedPending(t *testing.T) {
	etcd := etcdtest.Start(t)
	const group = "www.example.org."
	every := "  pending_interval: 50ms\n"
	var share *setPending
	a := startNodeWith(t, t.TempDir(), "a", etcd.Endpoint(), every, func(d *dispatch.Dispatcher) cluster.PendingSharer {
		share = &setPending{Dispatcher: d}
		return share
	})
	b := startNodeWith(t, t.TempDir(), "b", etcd.Endpoint(), every, nil)
	probetest.Until(t, 5*time.Second, func() string {
		if da, db := a.store.Status().Degraded, b.store.Status().Degraded; da || db {
			return fmt.Sprintf("both nodes connected: a degraded %t, b %t", da, db)
		}
		return ""
	})
	seenByB := func(what string, want float64) func() string {
		return func() string {
			live, ok := b.disp.Live(group)
			if !ok {
				return what + ": b has no live view of " + group
			}
			if got := live["fra1"].Pending; math.Abs(got-want) >= 1e-9 {
				return fmt.Sprintf("%s: b sees %g pending on fra1, want %g", what, got, want)
			}
			return ""
		}
	}
	for _, step := range []struct {
		name string
		a    map[string]dispatch.FamilyPending
		want float64
	}{
		{"a's answers sent fra1 40 load units", map[string]dispatch.FamilyPending{"fra1": {40, 0}}, 40},
		{"they grow", map[string]dispatch.FamilyPending{"fra1": {80, 0}}, 80},
		{"they ramp out", map[string]dispatch.FamilyPending{}, 0},
		{"new answers", map[string]dispatch.FamilyPending{"fra1": {30, 0}}, 30},
	} {
		began := time.Now()
		share.set(step.a)
		probetest.Until(t, 5*time.Second, seenByB(step.name+": b sees it", step.want))
		t.Logf("figure: %s: on b after %v", step.name, time.Since(began).Round(time.Millisecond))
	}
	if got := b.disp.LocalPending()[group]; len(got) != 0 {
		t.Errorf("b's own pending %v, want none (a's is not b's to share)", got)
	}

	// etcd away: b can not hear a any more, and does not keep a figure
	// nobody updates; back, it reads a's share again.
	etcd.Stop()
	probetest.Until(t, 10*time.Second, seenByB("etcd stopped: a's share gone from b", 0))
	etcd.Restart()
	probetest.Until(t, 15*time.Second, seenByB("etcd back: a's share on b again", 30))

	a.stop()
	probetest.Until(t, 5*time.Second, seenByB("a stopped: its share gone from b", 0))

}
