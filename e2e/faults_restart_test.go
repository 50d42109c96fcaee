package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestFaultDNSDRestart: an NS set of two dnsd, each with its own state
// file, the same config, the same run-time member added to both and the
// same static member drained on both; a real unbound with both as stub
// addresses in front of clients that resolve the group all along, each
// time through a name unbound has not seen (so that every query reaches
// one of the dnsd). One dnsd is restarted
// (SIGTERM, then started again on its address): unbound keeps resolving
// the group through the other, every answer is the run-time member and
// the static one that is not drained, and the restarted dnsd answers the
// same from its state file.
func TestFaultDNSDRestart(t *testing.T) {
	const restartOutage, clients = 3 * time.Second, 4
	t.Parallel()
	static := []faultMember{{name: "sin1", ip: "127.0.44.1"}, {name: "nyc1", ip: "127.0.44.2"}}
	added := faultMember{name: "fra9", ip: "127.0.44.9"}
	want := []string{static[0].ip, added.ip} // nyc1 drained
	var ds []*dnsdProc
	var cfgs []string
	for range 2 {
		cfg := faultDNSD(t, t.TempDir(), 4, "state_file: state.json\n", static...)
		d := startDNSD(t, true, "-config", cfg)
		faultAdd(t, d, added)
		if out, err := groupctl(t, d.Admin, faultSecret, "drain", faultGroup, static[1].name); err != nil {
			t.Fatalf("groupctl drain: %v\n%s", err, out)
		}
		ds, cfgs = append(ds, d), append(cfgs, cfg)
	}
	u := startUnboundStubs(t, []string{ds[0].Host + "@" + ds[0].Port, ds[1].Host + "@" + ds[1].Port}, "", "example.test.")
	check := func(r *dns.Msg) error {
		if r.Rcode != dns.RcodeSuccess {
			return fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
		}
		var got []string
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok {
				got = append(got, a.A.String())
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("answer %v, want %v", got, want)
		}
		return nil
	}

	// The clients, each asking unbound again 5 ms after an answer,
	// each time for a new alias of the group (q<n>.any), which unbound
	// must ask one of the dnsd for.
	type rec struct {
		client int
		sent   time.Time
		took   time.Duration
		err    error
	}
	var (
		mu   sync.Mutex
		recs []rec
		sent atomic.Int64
		seq  atomic.Int64
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
			for ctx.Err() == nil {
				// A name unbound has not seen: its cache can not answer.
				m := new(dns.Msg).SetQuestion(fmt.Sprintf("q%d.any.example.test.", seq.Add(1)), dns.TypeA)
				at := time.Now()
				r, _, err := c.Exchange(m, "127.0.0.1:"+u.Port)
				if err == nil {
					err = check(r)
				}
				sent.Add(1)
				mu.Lock()
				recs = append(recs, rec{i, at, time.Since(at), err})
				mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}
	queriesAt := func(d *dnsdProc) float64 {
		return metricSum(scrape(t, d.Admin), "transmirror_dnsd_queries_total", `qtype="A"`, `rcode="NOERROR"`)
	}
	probetest.Until(t, 10*time.Second, func() string {
		if n := sent.Load(); n < 100 {
			return fmt.Sprintf("%d queries through unbound so far", n)
		}
		return ""
	})

	// Restart the first dnsd on its address.
	other := queriesAt(ds[1])
	stopAt := time.Now()
	ds[0].Stop()
	writeFile(t, strings.TrimSuffix(cfgs[0], "dnsd.yaml"), "dnsd.yaml",
		strings.Replace(readFileT(t, cfgs[0]), `listen: ["127.0.0.1:0"]`, fmt.Sprintf(`listen: ["%s"]`, ds[0].Addr), 1))
	// dnsd starts again in milliseconds; a restart in the field (a new
	// binary, a host reboot) takes longer: it stays down for the outage.
	<-time.After(restartOutage)
	restarted := startDNSD(t, true, "-config", cfgs[0])
	upAt := time.Now()
	if restarted.Addr != ds[0].Addr {
		t.Fatalf("the restarted dnsd listens on %s, want %s", restarted.Addr, ds[0].Addr)
	}
	otherDuring := queriesAt(ds[1]) - other
	// Two more seconds of clients with both back.
	<-time.After(2 * time.Second)
	cancel()
	wg.Wait()

	var total, during, failed int
	inOutage := map[int]int{} // client → queries sent during the outage
	var first []string
	var before, outage []time.Duration // latencies
	for _, r := range recs {
		total++
		switch {
		case r.sent.Before(stopAt):
			before = append(before, r.took)
		case r.sent.Before(upAt):
			during++
			inOutage[r.client]++
			outage = append(outage, r.took)
		}
		if r.err != nil {
			failed++
			if len(first) < 5 {
				first = append(first, fmt.Sprintf("%v after the stop: %v", r.sent.Sub(stopAt).Round(time.Millisecond), r.err))
			}
		}
	}
	t.Logf("through unbound: %d queries, %d failed; %d of them in the %v from the stop of the first dnsd to its restart (the other dnsd answered %.0f meanwhile); latency before the stop %s, during the outage %s",
		total, failed, during, upAt.Sub(stopAt).Round(time.Millisecond), otherDuring, latencies(before), latencies(outage))
	if failed > 0 {
		t.Errorf("%d of %d queries through unbound failed; first: %s", failed, total, strings.Join(first, "; "))
	}
	// Each client was answered during the outage, through the other dnsd.
	if len(inOutage) < clients || otherDuring < clients {
		t.Errorf("during the restart %d of %d clients sent queries through unbound (%v), the other dnsd answered %.0f: want every client answered by it", len(inOutage), clients, inOutage, otherDuring)
	}

	// The restarted dnsd: its run-time member and drain from its state file.
	for range 5 {
		r := restarted.Dig(t, faultGroup, "A")
		var got []string
		for _, x := range r.Answer {
			got = append(got, x.Data)
		}
		slices.Sort(got)
		if r.Status != "NOERROR" || !slices.Equal(got, want) {
			t.Fatalf("the restarted dnsd answers %s %v, want %v:\n%s", r.Status, got, want, r.Raw)
		}
	}
	v, err := groupView(restarted.Admin)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, m := range v.Members {
		seen[m.Name] = m.Source + "/" + m.State
	}
	if !strings.HasPrefix(seen[added.name], "runtime/") || !strings.HasSuffix(seen[static[1].name], "/draining") {
		t.Errorf("after the restart the view has %v, want %s runtime and %s draining", seen, added.name, static[1].name)
	}
}

// latencies describes a sample of durations: count, median, the 90th
// percentile and the most.
func latencies(d []time.Duration) string {
	if len(d) == 0 {
		return "(none)"
	}
	d = slices.Clone(d)
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))].Round(100 * time.Microsecond) }
	return fmt.Sprintf("median %v, p90 %v, max %v (n %d)", q(0.5), q(0.9), d[len(d)-1].Round(100*time.Microsecond), len(d))
}
