package frontend

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
	simbackend "github.com/transmirror/transmirror/scheduler/sim/backend"
	"github.com/transmirror/transmirror/scheduler/sim/sitesim"
	"github.com/transmirror/transmirror/scheduler/sim/workload"
	"github.com/transmirror/transmirror/scheduler/site"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// The simulator (scheduler/sim/sitesim) and the live front end make the
// same choices for the same requests: the test sends one sequence of
// requests through a real front end over four back ends, one at a time
// (each completes, and the policy has heard of it, before the next is
// sent), and through sitesim with one request outstanding, with the
// same policy, parameters and random source (sitesim.PolicyRand), and
// requires the same back end for every request.
//
// What makes the two alike: the back ends have the same names (b1…b4:
// the policies hash names), weights and memory; the policy is told the
// key and the client (127.0.0.1 on both sides) at the pick, not the
// size, which the live front end does not know yet; Done is told the
// size of the response; no back end goes down; and the policies' clocks
// agree. In the simulator every request takes exactly 1 s (1 s of a back
// end's CPU, nothing else, and a front end that costs nothing), so that
// request n is picked at n s; the live front end's clock (Options.Now)
// is set to n s before request n is sent. (Done's time, which no policy
// reads, is n s there and n+1 s in the simulator.) ward analyses every
// 10 s of that clock, on both sides at the same picks, and its core
// fills. Every policy is covered, in proxy mode (fast path and
// ReverseProxy) and in handoff mode (equivalence_handoff_test.go).
// Sequentially, the in-flight counts are all 0 at each pick, so that
// least-conn and every tie of the least loaded back end go by the random
// source, and lard-r never replicates (no back end is ever loaded past
// T_high): the comparison covers the picks, not the policies' load rules.

// Size of the back ends' memory on both sides: a few of the objects.
const equivMemory = 64 << 10

// equivHeader names the back end that served a response.
const equivHeader = "X-Equiv-Backend"

// equivSeq is the sequence both sides replay: keys[reqs[i]] is request
// i's, sizes[k] the size of key k.
type equivSeq struct {
	keys  []string
	sizes []int64
	reqs  []int
}

// newEquivSeq returns 200 requests over 40 keys of Zipf popularity, each
// key of a size of its own, from 1000 to 21,000 bytes.
func newEquivSeq() equivSeq {
	var s equivSeq
	for k := range 40 {
		s.keys = append(s.keys, fmt.Sprintf("/pub/f%02d.bin", k))
		s.sizes = append(s.sizes, int64(1000+k*7919%20_000))
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 1, uint64(len(s.keys)-1))
	for range 200 {
		s.reqs = append(s.reqs, int(z.Uint64()))
	}
	return s
}

// workload is the sequence as sitesim replays it, all from the client
// the live front end sees: 127.0.0.1.
func (s equivSeq) workload() sitesim.Workload {
	reqs := make([]workload.Request, len(s.reqs))
	for i, k := range s.reqs {
		reqs[i] = workload.Request{Object: uint32(k), Size: uint64(s.sizes[k]), Status: http.StatusOK}
	}
	return sitesim.Workload{Requests: slices.Values(reqs), Objects: s.keys, Clients: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}
}

// handler is back end name: each key's bytes with its Content-Length
// and equivHeader, "ok" for anything else (health checks).
func (s equivSeq) handler(name string) http.Handler {
	sizes := make(map[string]int64, len(s.keys))
	for k, key := range s.keys {
		sizes[key] = s.sizes[k]
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size, ok := sizes[r.URL.Path]
		if !ok {
			_, _ = io.WriteString(w, "ok\n")
			return
		}
		w.Header().Set(equivHeader, name)
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		_, _ = w.Write(make([]byte, size))
	})
}

// equivPolicies are the policies compared, each with the parameters
// that both sides are given.
func equivPolicies() []PolicyConfig {
	var ps []PolicyConfig
	for _, name := range site.Names() {
		p := PolicyConfig{Name: name}
		if name == site.WARD {
			p.WardInterval = yamlconf.Duration(10 * time.Second)
		}
		ps = append(ps, p)
	}
	return ps
}

// equivSeed seeds both sides' random source.
const equivSeed = 42

// simPicks is the back end (0 for b1) that sitesim picks for each
// request of s, one at a time, each taking 1 s, in mode with policy p.
func simPicks(t *testing.T, mode string, p PolicyConfig, s equivSeq) []int {
	t.Helper()
	var picks []int
	c := sitesim.Config{Policy: p.Name, Params: p.Params(), Seed: equivSeed, Backends: 4,
		Backend:     simbackend.Config{Memory: equivMemory, Costs: simbackend.Costs{PerRequest: time.Second}},
		Outstanding: 1, Mode: mode, Frontend: &sitesim.FrontendCosts{},
		OnPick: func(_, b int) { picks = append(picks, b) }}
	if _, err := sitesim.Run(c, s.workload()); err != nil {
		t.Fatal(err)
	}
	return picks
}

// equivClock is the live front end's clock: the test sets it to the
// time of each pick in the simulator.
type equivClock struct{ ns atomic.Int64 }

func (c *equivClock) now() time.Time { return time.Unix(0, c.ns.Load()) }

// live is the front end of a comparison, its clock, and the client
// that talks to it.
type live struct {
	base   string
	h      *handler
	clock  *equivClock
	client *http.Client
}

// picks sends s through the front end, request n at n s of its clock,
// one at a time, and returns the back end that served each, and whether
// ward's core ever held a file: the next request goes once the front end
// holds no request any more (it gives the admission slots back after the
// policy's Done).
func (l live) picks(t *testing.T, s equivSeq) (picks []int, core bool) {
	t.Helper()
	for i, k := range s.reqs {
		l.clock.ns.Store(int64(i) * int64(time.Second))
		resp, err := l.client.Get(l.base + s.keys[k])
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || n != s.sizes[k] {
			t.Fatalf("request %d: status %d, %d bytes, %v; want 200 and %d bytes", i, resp.StatusCode, n, err, s.sizes[k])
		}
		b, err := strconv.Atoi(strings.TrimPrefix(resp.Header.Get(equivHeader), "b"))
		if err != nil {
			t.Fatalf("request %d: back end %q", i, resp.Header.Get(equivHeader))
		}
		picks = append(picks, b-1)
		probetest.Until(t, 10*time.Second, func() string {
			if used, _ := l.h.adm.state(); used != 0 {
				return fmt.Sprintf("request %d done: %d requests still held", i, used)
			}
			return ""
		})
		if st := l.h.policy.(site.Stater).State(); st.WARD != nil && st.WARD.CoreFiles > 0 {
			core = true
		}
	}
	return picks, core
}

// compare fails t unless the live front end l and sitesim in mode make
// the same picks for s with policy p, and ones that tell something: more
// than one back end but for client-hash (one client), a core for ward.
func compare(t *testing.T, l live, mode string, p PolicyConfig, s equivSeq) {
	t.Helper()
	got, core := l.picks(t, s)
	want := simPicks(t, mode, p, s)
	if !slices.ContainsFunc(got, func(b int) bool { return b != got[0] }) && p.Name != site.ClientHash {
		t.Errorf("every request on b%d: the comparison tells little", got[0]+1)
	}
	if p.Name == site.WARD && !core {
		t.Error("ward's core never held a file: its analysis went untested")
	}
	if slices.Equal(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("request %d: live front end b%d, simulator b%d\nlive %v\nsim  %v", i, got[i]+1, want[i]+1, got, want)
		}
	}
	t.Fatalf("%d live picks, %d simulated", len(got), len(want))
}

// TestSimulatorPicksAsProxy: in proxy mode, on the fast path and
// through httputil.ReverseProxy.
func TestSimulatorPicksAsProxy(t *testing.T) {
	s := newEquivSeq()
	var bs []Backend
	for i := range 4 {
		name := fmt.Sprintf("b%d", i+1)
		bs = append(bs, Backend{Name: name, URL: webtest.Serve(t, s.handler(name)), Memory: equivMemory})
	}
	for _, path := range []struct {
		name string
		slow bool
	}{{"fast path", false}, {"ReverseProxy", true}} {
		for _, p := range equivPolicies() {
			t.Run(path.name+"/"+p.Name, func(t *testing.T) {
				clock := &equivClock{}
				base, h, _ := startSiteWith(t, Config{Policy: p, Health: quietHealth},
					Options{Rand: sitesim.PolicyRand(equivSeed), Now: clock.now, NoFastPath: path.slow}, slices.Clone(bs)...)
				client := &http.Client{Timeout: 30 * time.Second}
				t.Cleanup(client.CloseIdleConnections)
				compare(t, live{base: base, h: h, clock: clock, client: client}, sitesim.ModeProxy, p, s)
			})
		}
	}
}
