package dispatch

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/zones"
)

// membersSet is the test config with a group of n members spread over
// the globe, each with its own address.
func membersSet(b *testing.B, n int) *zones.Set {
	b.Helper()
	head, _, _ := strings.Cut(dispatchConfig, "    members:\n")
	var ms strings.Builder
	ms.WriteString("    members:\n")
	for i := range n {
		lat, lon := float64(i*37%120)-55, float64(i*73%360)-180
		fmt.Fprintf(&ms, "      - {name: m%d, host: m%d.example.org., addresses: [10.1.%d.%d], capacity: 100000, location: {lat: %v, lon: %v}}\n",
			i, i, i/250, i%250+1, lat, lon)
	}
	return loadDispatchConfig(b, strings.ReplaceAll(head, "POLICY", "geo-load")+ms.String())
}

// BenchmarkGroupAnswerMembers: the dispatcher's group answer (geo-load,
// ECS from 64 networks) for groups of 4, 64, 128 and 512 members (the most a group may have): the cost
// per answer should not grow with the group.
func BenchmarkGroupAnswerMembers(b *testing.B) {
	for _, n := range []int{4, 64, 128, 512} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			d, err := New(Options{Now: time.Now, Seed: 42})
			if err != nil {
				b.Fatal(err)
			}
			if err := d.Load(membersSet(b, n)); err != nil {
				b.Fatal(err)
			}
			var qs [64]dnsd.GroupQuery
			for i := range qs {
				qs[i] = dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver,
					ECS: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(i), 0}), 24)}
			}
			var addrs []netip.Addr
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q := qs[i&63]
				q.Addrs = addrs
				ga, err := d.AnswerGroup(context.Background(), q)
				if err != nil {
					b.Fatal(err)
				}
				addrs = ga.Addrs[:0]
				i++
			}
		})
	}
}
