package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/probetest"
)

// TestNSSetSharesPending: the hidden load of the answers one node of an
// NS set gives reaches the other node's picks through etcd: after dig
// asks ns1 for the group from 20 client subnets, ns2's view of the member
// shows the same pending load as ns1's, though ns2 answered nobody.
func TestNSSetSharesPending(t *testing.T) {
	t.Parallel()
	s := startNSSet(t, 2)
	ns1 := s.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()

	// static1 is up on both: its reports pushed to both (a mirror's push:
	// all; reports are not relayed through etcd), every 100 ms until the
	// test ends.
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for seq := uint64(1); ctx.Err() == nil; seq++ {
			for i := range 2 {
				_ = s.client(t, i).PushLoad(ctx, probe.Report{Group: nssetGroup + ".", Member: "static1", Seq: seq,
					Time: time.Now(), R: 10, Load: 100, Capacity: 1000})
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})
	pending := func(i int) (float64, string) {
		v, err := s.client(t, i).Group(ctx, nssetGroup)
		if err != nil {
			return 0, err.Error()
		}
		for _, m := range v.Members {
			if m.Name == "static1" {
				if m.State != "up" {
					return 0, fmt.Sprintf("ns%d: static1 is %s", i+1, m.State)
				}
				return m.Pending, ""
			}
		}
		return 0, fmt.Sprintf("ns%d has no static1", i+1)
	}
	probetest.Until(t, 10*time.Second, func() string {
		for i := range 2 {
			if _, why := pending(i); why != "" {
				return why
			}
		}
		return ""
	})

	asked := time.Now()
	for i := range 20 {
		r := ns1.Dig(t, nssetGroup+".", "A", fmt.Sprintf("+subnet=198.51.%d.0/24", i))
		if r.Status != "NOERROR" || len(r.Answer) == 0 {
			t.Fatalf("dig ns1 from 198.51.%d.0/24: %s\n%s", i, r.Status, r.Raw)
		}
	}
	var on1, on2 float64
	probetest.Until(t, 5*time.Second, func() string {
		var why string
		if on1, why = pending(0); why != "" {
			return why
		}
		if on2, why = pending(1); why != "" {
			return why
		}
		// ns2 shows what ns1 booked, as of ns1's last share (a share
		// waits for a change of 5 % or 1 load unit; ns1's own ramps out
		// meanwhile), and ns1 booked some.
		if tol := max(1, 0.1*on1); on1 <= 0 || on2 < on1-tol || on2 > on1+tol {
			return fmt.Sprintf("static1 pending: ns1 %.1f, ns2 %.1f", on1, on2)
		}
		return ""
	})
	t.Logf("figure: ns1's answers to 20 subnets: pending %.1f load units on ns1, %.1f on ns2 (which answered none), %v after the first dig",
		on1, on2, time.Since(asked).Round(time.Millisecond))
}
