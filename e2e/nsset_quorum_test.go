package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/probetest"
)

// TestNSSetQuorum: the multi-vantage health check on three real dnsd and a
// real etcd. Each node probes the member q1 by a path of its own on one
// loopback server, so the test decides which node sees it fail. With
// quorum (down_share 0.5) q1 stays in every node's answers while one node
// of three sees it down, even in that node's, and leaves them all when two
// do; it comes back when they see it up again.
func TestNSSetQuorum(t *testing.T) {
	t.Parallel()
	var failing [4]atomic.Bool // by node, from 1
	var seq atomic.Uint64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var node int
		if _, err := fmt.Sscanf(r.URL.Path, "/n%d/v1/load", &node); err != nil || node < 1 || node > 3 {
			http.NotFound(w, r)
			return
		}
		if failing[node].Load() {
			http.Error(w, "this path is down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(probe.Report{Group: nssetGroup + ".", Member: "q1", Seq: seq.Add(1), Time: time.Now(),
			R: 1, Load: probe.LoadOf(1, 0), Capacity: 1000})
	}))
	defer target.Close()
	const q1 = "127.0.30.1"
	s := startNSSetWith(t, 3, func(i int) (string, string) {
		return "  quorum: {enabled: true, down_share: 0.5}\n",
			fmt.Sprintf("      - {name: q1, host: q1.example.test., addresses: [%s], capacity: 1000, probe: %q}\n", q1, fmt.Sprintf("%s/n%d/v1/load", target.URL, i))
	})
	all := s.nodes
	// votes is each node's count of the nodes that see q1 down.
	votes := func(want float64) func() string {
		return func() string {
			for i, d := range all {
				v, err := downVotes(d, "q1")
				if err != nil {
					return fmt.Sprintf("node %d: %v", i+1, err)
				}
				if v != want {
					return fmt.Sprintf("node %d counts %g nodes seeing q1 down, want %g", i+1, v, want)
				}
			}
			return ""
		}
	}
	waitAnswered(t, all, q1, true, 10*time.Second)

	failing[1].Store(true)
	began := time.Now()
	probetest.Until(t, 10*time.Second, votes(1))
	t.Logf("figure: ns1's path down: every node counts 1 down vote after %v", time.Since(began).Round(time.Millisecond))
	// 1 of 3 is not more than half: q1 stays, ns1's answers included.
	waitAnswered(t, all, q1, true, time.Second)

	failing[2].Store(true)
	took := waitAnswered(t, all, q1, false, 10*time.Second)
	t.Logf("figure: ns2's path down too (2 of 3): q1 out of all three's answers after %v", took.Round(time.Millisecond))
	probetest.Until(t, 5*time.Second, votes(2))
	// The dashboard of ns3, in a real browser, says so.
	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.Navigate("http://"+all[2].Admin+"/")); err != nil {
		t.Fatalf("open ns3's dashboard: %v", err)
	}
	waitDOM(t, browser, 10*time.Second, "ns3's dashboard shows q1 down on ns1 and ns2 of 3 nodes, out",
		`(document.querySelector("#cluster")||{}).textContent.includes("quorum > 50%: q1 2/3 down (ns1 ns2) out")`)

	failing[1].Store(false)
	failing[2].Store(false)
	took = waitAnswered(t, all, q1, true, 10*time.Second)
	t.Logf("figure: both paths back: q1 in all three's answers after %v", took.Round(time.Millisecond))
	probetest.Until(t, 5*time.Second, votes(0))
}

// downVotes reads transmirror_dnsd_cluster_member_down_votes of member
// from node d.
func downVotes(d *dnsdProc, member string) (float64, error) {
	return metric(d.Admin, "transmirror_dnsd_cluster_member_down_votes", `member="`+member+`"`)
}
