package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// The two planes of dnsd (issue 22): live data (load reports) comes from
// its source to every node; etcd carries what must survive and what the
// nodes derive, not what mirrors report.

// planesMirrors is how many pushing mirrors TestPlanesEtcdWrites runs.
const planesMirrors = 20

// planesPushInterval is a mirror's dnsd.push_interval by default.
const planesPushInterval = group.DefaultPushInterval

// planesRounds is how many push rounds TestPlanesEtcdWrites measures.
const planesRounds = 3

// TestPlanesEtcdWrites counts the etcd writes (keys put or deleted, from
// etcd's own etcd_mvcc_put_total and etcd_mvcc_delete_total) of a
// two-node NS set in the default configuration (health, pending load,
// quorum off) while 20 mirrors push their load every planesPushInterval (the
// default) to every node
// (a mirror's push: all), and gives them per node per second. Pushed
// reports are live data that every node already has, so they write
// nothing to etcd.
func TestPlanesEtcdWrites(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	nodes := startPlanesSet(t, etcd, 2)
	clients := make([]*api.Client, len(nodes))
	for i, d := range nodes {
		c, err := api.NewClient("http://"+d.Admin, api.ClientOptions{Secret: []byte(faultSecret)})
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(planesRounds+6)*planesPushInterval+30*time.Second)
	defer cancel()

	// Every mirror pushes to every node each round; round n is done when
	// every push of it was answered.
	rounds := make(chan time.Time, planesRounds+2)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		tick := time.NewTicker(planesPushInterval)
		defer tick.Stop()
		for seq := uint64(1); ctx.Err() == nil; seq++ {
			var round sync.WaitGroup
			for m := range planesMirrors {
				for _, c := range clients {
					round.Go(func() {
						err := c.PushLoad(ctx, probe.Report{Group: nssetGroup + ".", Member: planesMember(m), Seq: seq,
							Time: time.Now(), R: 10, Load: 100, Capacity: 1000})
						if err != nil && ctx.Err() == nil {
							t.Errorf("push %s: %v", planesMember(m), err)
						}
					})
				}
			}
			round.Wait()
			select {
			case rounds <- time.Now():
			default:
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	})

	// Every member comes up with its second push (health.rise 2), on
	// every node; measure the rounds after that.
	<-rounds
	probetest.Until(t, 3*planesPushInterval, func() string {
		for i, d := range nodes {
			if up, err := metric(d.Admin, "transmirror_dnsd_member_up"); err != nil || up < planesMirrors {
				return fmt.Sprintf("ns%d: %v members up (%v)", i+1, up, err)
			}
		}
		return ""
	})
	<-rounds
	w0, at0 := etcdWrites(t, etcd)
	for range planesRounds {
		<-rounds
	}
	w1, at1 := etcdWrites(t, etcd)
	cancel()
	perNode := (w1 - w0) / at1.Sub(at0).Seconds() / float64(len(nodes))
	reports := float64(planesMirrors) / planesPushInterval.Seconds()
	t.Logf("figure: %d mirrors pushing every %v to %d nodes: %.0f etcd writes in %v, %.2f per node per second (%.1f reports per node per second)",
		planesMirrors, planesPushInterval, len(nodes), w1-w0, at1.Sub(at0).Round(time.Millisecond), perNode, reports)
	// Before issue 22 every node put every report it took under
	// reports/ (2.77 writes per node per second here); now a report
	// writes nothing, and with no answers and no health change there is
	// nothing to derive.
	if limit := 0.05 * reports; perNode > limit {
		t.Errorf("%.2f etcd writes per node per second, want at most %.2f: reports go through etcd again?", perNode, limit)
	}
}

// planesMember is the name of mirror i.
func planesMember(i int) string { return fmt.Sprintf("m%02d", i) }

// etcdWrites reads etcd's count of keys put and deleted, and when.
func etcdWrites(t *testing.T, etcd *etcdtest.Server) (float64, time.Time) {
	t.Helper()
	text, err := getBody(loopbackClient, etcd.Endpoint()+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "\netcd_mvcc_put_total ") {
		t.Fatalf("etcd exports no etcd_mvcc_put_total:\n%s", text)
	}
	return metricSum(text, "etcd_mvcc_put_total") + metricSum(text, "etcd_mvcc_delete_total"), time.Now()
}

// startPlanesSet starts n dnsd nodes of an NS set on etcd, in the default
// configuration but for what a test needs (loopback listeners, a secret,
// private addresses), with planesMirrors push-only members.
func startPlanesSet(t *testing.T, etcd *etcdtest.Server, n int) []*dnsdProc {
	t.Helper()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	var members strings.Builder
	for i := range planesMirrors {
		fmt.Fprintf(&members, "      - {name: %[1]s, host: %[1]s.example.test., addresses: [127.0.11.%[2]d], capacity: 1000}\n", planesMember(i), i+1)
	}
	var nodes []*dnsdProc
	for i := 1; i <= n; i++ {
		dir := t.TempDir()
		writeFile(t, dir, "example.test.zone", string(zone))
		cfg := writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e planes node %[1]d
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
state_file: state.json
cluster:
  node: ns%[1]d
  etcd: {endpoints: ["%[2]s"], prefix: /e2e-planes/}
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %[3]s.
    secret: %[4]s
    allow_private: true
    members:
%[5]s`, i, etcd.Endpoint(), nssetGroup, faultSecret, members.String()))
		nodes = append(nodes, startDNSD(t, true, "-config", cfg))
	}
	return nodes
}
