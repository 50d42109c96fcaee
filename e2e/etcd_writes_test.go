package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
)

// The measurement behind docs/etcd.md's sizing: what one dnsd node of an
// NS set writes to etcd with N groups of M members each, idle and under
// a steady load of queries (each answer books pending load, which the
// node shares every pending_interval when it moved by more than its
// tolerance). Figures, not a timed assertion: the test checks only what
// the code bounds (at most one transaction per pending_interval per 100
// groups) and that the load made it share at all.

// etcdWriteWindow is how long each phase is counted.
const etcdWriteWindow = 4 * time.Second

// etcdCounters are the etcd counters that a phase differences.
var etcdCounters = []string{
	"etcd_debugging_mvcc_current_revision",  // one per write transaction (or put, delete)
	"etcd_server_proposals_committed_total", // raft entries: writes, lease grants and revokes
	"etcd_mvcc_put_total",
	"etcd_mvcc_delete_total",
	"etcd_mvcc_range_total", // reads (the session's check of its nodes/ entry)
	"etcd_debugging_lease_renewed_total",
	"etcd_debugging_mvcc_total_put_size_in_bytes", // what compaction and defrag will have to reclaim
}

// TestEtcdWriteRate measures etcd's load from one dnsd with quorum on, for
// (N groups, M members) = (1, 4) and (10, 32): idle, then answering about
// 400 queries a second spread over the groups.
func TestEtcdWriteRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ groups, members int }{{1, 4}, {10, 32}} {
		t.Run(fmt.Sprintf("%d groups x %d members", tc.groups, tc.members), func(t *testing.T) {
			t.Parallel()
			e := etcdtest.Start(t)
			d := startWritesDNSD(t, e, tc.groups, tc.members)
			waitDegraded(t, []*dnsdProc{d}, 0, 10*time.Second)
			idle := countEtcd(t, e, d, etcdWriteWindow, nil)
			busy := countEtcd(t, e, d, etcdWriteWindow, func(ctx context.Context) { queryGroups(ctx, d.Addr, tc.groups, 400) })
			for _, p := range []struct {
				name string
				c    etcdCount
			}{{"idle", idle}, {"busy", busy}} {
				t.Logf("figure: %d groups x %d members, %s: %s", tc.groups, tc.members, p.name, p.c)
			}
			// What the code bounds: one transaction per pending_interval
			// (250ms) per 100 groups, whatever the load.
			if limit := math.Ceil(float64(tc.groups)/100) * (busy.elapsed.Seconds()/0.25 + 1); busy.shares > limit {
				t.Errorf("busy: %g pending shares in %v, want at most %g (one per pending_interval per 100 groups)", busy.shares, busy.elapsed, limit)
			}
			if busy.delta["etcd_debugging_mvcc_current_revision"] <= 0 || busy.shares <= 0 {
				t.Errorf("busy: revision +%g, %g shares: want the answers' pending load shared", busy.delta["etcd_debugging_mvcc_current_revision"], busy.shares)
			}
		})
	}
}

// startWritesDNSD starts one dnsd of an NS set on etcd e with groups
// groups (g1… in example.test) of members static members each, quorum on.
func startWritesDNSD(t *testing.T, e *etcdtest.Server, groups, members int) *dnsdProc {
	t.Helper()
	dir := t.TempDir()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "example.test.zone", string(zone))
	var b strings.Builder
	for g := 1; g <= groups; g++ {
		fmt.Fprintf(&b, "  - name: g%d.example.test.\n    ttl: {min: 1, max: 1}\n    answers: 2\n    secret: %s\n    allow_private: true\n    members:\n", g, faultSecret)
		for m := 1; m <= members; m++ {
			fmt.Fprintf(&b, "      - {name: m%d, host: m%d.g%d.example.test., addresses: [127.1.%d.%d], capacity: 1000}\n", m, m, g, g, m)
		}
	}
	cfg := writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e: etcd's load from one dnsd
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
state_file: state.json
server: {identity: ns1.example.test, nsid: ns1}
health: {interval: 1s, timeout: 250ms, jitter: 100ms}
cluster:
  node: ns1
  etcd: {endpoints: ["%s"], prefix: /e2e-writes/}
  quorum: {enabled: true}
zones:
  - origin: example.test.
    file: example.test.zone
groups:
%s`, e.Endpoint(), b.String()))
	return startDNSD(t, true, "-config", cfg)
}

// etcdCount is what etcd counted in one phase, and the pending shares
// dnsd made.
type etcdCount struct {
	elapsed time.Duration
	delta   map[string]float64
	shares  float64 // transmirror_dnsd_cluster_shared_pending_total out ok
}

func (c etcdCount) String() string {
	per := func(name string) float64 { return c.delta[name] / c.elapsed.Seconds() }
	return fmt.Sprintf("%.1f revisions/s, %.1f raft proposals/s, %.1f puts/s (%.0f bytes/s), %.1f deletes/s, %.1f ranges/s, %.1f lease renewals/s, %.1f pending shares/s (over %v)",
		per(etcdCounters[0]), per(etcdCounters[1]), per(etcdCounters[2]), per(etcdCounters[6]), per(etcdCounters[3]), per(etcdCounters[4]),
		per(etcdCounters[5]), c.shares/c.elapsed.Seconds(), c.elapsed.Round(time.Millisecond))
}

// countEtcd counts etcd's counters and dnsd's shares over window while
// load (nil: none) runs.
func countEtcd(t *testing.T, e *etcdtest.Server, d *dnsdProc, window time.Duration, load func(context.Context)) etcdCount {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	before, shares := etcdSample(t, e, d)
	start := time.Now()
	if load != nil {
		load(ctx)
	}
	<-ctx.Done()
	after, shares2 := etcdSample(t, e, d)
	c := etcdCount{elapsed: time.Since(start), delta: map[string]float64{}, shares: shares2 - shares}
	for name, v := range after {
		c.delta[name] = v - before[name]
	}
	return c
}

// etcdSample reads etcd's counters and dnsd's pending shares.
func etcdSample(t *testing.T, e *etcdtest.Server, d *dnsdProc) (map[string]float64, float64) {
	t.Helper()
	text, err := e.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, name := range etcdCounters {
		out[name] = metricSum(text, name)
	}
	shares, err := metric(d.Admin, "transmirror_dnsd_cluster_shared_pending_total", `direction="out"`, `result="ok"`)
	if err != nil {
		t.Fatal(err)
	}
	return out, shares
}

// queryGroups asks dnsd at addr for the groups' A records, about qps a
// second in all from eight clients, until ctx ends.
func queryGroups(ctx context.Context, addr string, groups, qps int) {
	const clients = 8
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			cl := &dns.Client{Timeout: time.Second}
			tick := time.NewTicker(time.Second * clients / time.Duration(qps))
			defer tick.Stop()
			for i := c; ; i += clients {
				m := new(dns.Msg)
				m.SetQuestion(fmt.Sprintf("g%d.example.test.", 1+i%groups), dns.TypeA)
				_, _, _ = cl.ExchangeContext(ctx, m, addr)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
}
