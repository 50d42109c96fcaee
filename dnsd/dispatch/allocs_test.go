//go:build !race

// The race detector makes sync.Pool drop items, so allocation counts are
// only meaningful without it: make unit runs these tests a second time
// without -race.

package dispatch

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/scheduler"
)

// TestAnswerGroupAllocs: a group answer allocates nothing once the
// client's network is in the locator's cache and the caller gives room
// for the addresses, for every policy.
func TestAnswerGroupAllocs(t *testing.T) {
	for _, policy := range scheduler.Names() {
		t.Run(policy, func(t *testing.T) {
			d, _ := newTestDispatcher(t, policy, time.Now)
			buf := make([]netip.Addr, 0, 8)
			q := dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver,
				ECS: netip.MustParsePrefix("2001:db8:3::/56"), Addrs: buf}
			if _, err := d.AnswerGroup(context.Background(), q); err != nil {
				t.Fatal(err)
			}
			n := testing.AllocsPerRun(200, func() {
				if _, err := d.AnswerGroup(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			})
			if n != 0 {
				t.Errorf("%v allocations per group answer, want 0", n)
			}
		})
	}
}
