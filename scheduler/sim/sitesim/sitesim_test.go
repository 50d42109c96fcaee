package sitesim

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/transmirror/transmirror/scheduler/sim/backend"
	"github.com/transmirror/transmirror/scheduler/sim/workload"
)

// synthetic is a SURGE-style stream of n requests over 20,000 objects of
// at most 1 MiB, and the working set: the sum of the objects' sizes.
func synthetic(t testing.TB, n int) (Workload, int64) {
	t.Helper()
	st, err := workload.Synthetic{Seed: 11, Requests: n, Objects: 20_000, Alpha: 0.8, MaxSize: 1 << 20}.New()
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(st.Sizes))
	var ws int64
	for i, sz := range st.Sizes {
		keys[i] = fmt.Sprintf("/pub/%05d", i)
		ws += int64(sz)
	}
	return Workload{Requests: st.Requests(), Objects: keys}, ws
}

// site4 is four back ends that each cache a quarter of the working set
// ws, objects up to 1 MiB, with the LARD paper's costs.
func site4(policy string, ws int64) Config {
	return Config{Policy: policy, Seed: 3, Backends: 4, Backend: backend.Config{Memory: ws / 4, MaxObject: 1 << 20},
		Outstanding: 64, Warmup: 20_000}
}

// TestDeterministic: the same site and workload give the same result.
func TestDeterministic(t *testing.T) {
	for _, policy := range []string{"wrr", "lard", "client-hash"} {
		t.Run(policy, func(t *testing.T) {
			w, ws := synthetic(t, 30_000)
			a, err := Run(site4(policy, ws), w)
			if err != nil {
				t.Fatal(err)
			}
			w, _ = synthetic(t, 30_000)
			b, err := Run(site4(policy, ws), w)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) || a.Requests != 10_000 {
				t.Errorf("two runs:\n%+v\n%+v\nwant the same, of 10,000 counted requests", a, b)
			}
		})
	}
}

// TestLARDOverWRR: with the working set four times one back end's memory
// (the aggregate memory holds it), LARD's partition of the objects hits
// far more than round robin's copies of the same popular ones, and the
// site serves more: the LARD paper's claim of 2–4× WRR's throughput
// there. The run's figures are logged.
func TestLARDOverWRR(t *testing.T) {
	res := map[string]Result{}
	for _, policy := range []string{"wrr", "lard"} {
		w, ws := synthetic(t, 120_000)
		r, err := Run(site4(policy, ws), w)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-5s %8.0f req/s  hit %.3f  byte hit %.3f  max/mean %.2f  cv %.3f", policy, r.Throughput, r.HitRatio, r.ByteHitRatio, r.MaxOverMean, r.CV)
		res[policy] = r
	}
	lard, wrr := res["lard"], res["wrr"]
	if lard.HitRatio <= wrr.HitRatio || lard.Throughput < 1.5*wrr.Throughput {
		t.Errorf("lard: hit %.3f, %.0f req/s; wrr: hit %.3f, %.0f req/s; want lard's hits higher and its throughput ≥ 1.5× wrr's",
			lard.HitRatio, lard.Throughput, wrr.HitRatio, wrr.Throughput)
	}
}

// TestConfigErrors: a site it can not run is an error that says why.
func TestConfigErrors(t *testing.T) {
	w, ws := synthetic(t, 10)
	for _, c := range []Config{{Policy: "wrr"}, {Policy: "nope", Backends: 1, Outstanding: 1}, site4("wrr", -ws)} {
		if _, err := Run(c, w); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestClientAddresses: a client's address is the workload's when it has
// a valid one, else one of its own from its index, spread over /24s.
func TestClientAddresses(t *testing.T) {
	r := &run{w: Workload{Clients: []netip.Addr{netip.MustParseAddr("192.0.2.7"), {}}}}
	if got := r.client(0); got != netip.MustParseAddr("192.0.2.7") {
		t.Errorf("client 0: %v, want the workload's 192.0.2.7", got)
	}
	nets := map[netip.Prefix]bool{}
	for i := uint32(1); i <= 256; i++ {
		a := r.client(i)
		if !a.Is4() || a.As4()[0] != 10 {
			t.Fatalf("client %d: %v, want one of 10.0.0.0/8", i, a)
		}
		p, _ := a.Prefix(24)
		nets[p] = true
	}
	if len(nets) < 200 {
		t.Errorf("256 clients in %d /24 networks, want them spread", len(nets))
	}
}
