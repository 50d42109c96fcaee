package scheduler

import (
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
)

// scope returns the i-th /24 scope (i < 65536).
func scope(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(i >> 8), byte(i), 0}), 24)
}

// observe answers scope with a fixed TTL, naming member 0, and returns its
// rate afterwards.
func observe(s *ScopeRates, sc netip.Prefix, ttl uint32, now time.Time) float64 {
	s.Answer(sc, ScopeAnswer{Members: 1, N: 1, Min: ttl, Max: ttl, Unseen: ttl, Fair: 1}, now)
	return s.Rate(sc, now)
}

func TestScopeRatesBounded(t *testing.T) {
	cases := []struct {
		name  string
		bound int
	}{
		{"one", 1},
		{"small", 10},
		{"thousand", 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScopeRates(ScopeRatesConfig{MaxScopes: tc.bound})
			now := time.Unix(1_700_000_000, 0)
			for i := range 10 * tc.bound {
				observe(s, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), 60, now)
				if s.Len() > tc.bound {
					t.Fatalf("Len() = %d after %d scopes, bound %d", s.Len(), i+1, tc.bound)
				}
			}
			if s.Len() != tc.bound {
				t.Errorf("Len() = %d, want %d", s.Len(), tc.bound)
			}
			// Every query counts in the total, evicted or not.
			if got, want := s.Total(now), float64(10*tc.bound)*60*math.Ln2/defaultScopeHalfLife.Seconds(); math.Abs(got-want) > 1e-9*want {
				t.Errorf("Total() = %g, want %g", got, want)
			}
		})
	}
}

func TestScopeRatesLRU(t *testing.T) {
	cases := []struct {
		name    string
		seen    []int // scopes observed, in order
		evicted []int
		kept    []int
	}{
		{"oldest-goes", []int{1, 2, 3, 4}, []int{1}, []int{2, 3, 4}},
		{"touched-stays", []int{1, 2, 3, 1, 4}, []int{2}, []int{1, 3, 4}},
		{"repeat-does-not-evict", []int{1, 1, 1, 2, 2, 3}, nil, []int{1, 2, 3}},
		{"all-replaced", []int{1, 2, 3, 4, 5, 6}, []int{1, 2, 3}, []int{4, 5, 6}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScopeRates(ScopeRatesConfig{MaxScopes: 3})
			now := time.Unix(1_700_000_000, 0)
			for k, i := range tc.seen {
				observe(s, scope(i), 30, now.Add(time.Duration(k)*time.Second))
			}
			for _, i := range tc.evicted {
				if r := s.Rate(scope(i), now); r != 0 {
					t.Errorf("scope %d: rate %g, want 0 (evicted)", i, r)
				}
			}
			for _, i := range tc.kept {
				if r := s.Rate(scope(i), now); r == 0 {
					t.Errorf("scope %d: rate 0, want it kept", i)
				}
			}
		})
	}
}

func TestScopeRatesDecay(t *testing.T) {
	const hl = time.Minute
	t0 := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name  string
		after time.Duration
		want  float64 // fraction of the rate at t0
	}{
		{"now", 0, 1},
		{"half-life", hl, 0.5},
		{"two-half-lives", 2 * hl, 0.25},
		{"ten-half-lives", 10 * hl, 1.0 / 1024},
		{"clock-backwards", -hl, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScopeRates(ScopeRatesConfig{halfLife: hl})
			r0 := observe(s, scope(1), 60, t0)
			if r0 <= 0 {
				t.Fatalf("Observe = %g, want > 0", r0)
			}
			if got := s.Rate(scope(1), t0.Add(tc.after)) / r0; math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("rate ratio = %g, want %g", got, tc.want)
			}
			if got := s.Total(t0.Add(tc.after)) / r0; math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("total ratio = %g, want %g", got, tc.want)
			}
		})
	}
}

// TestScopeRatesSteadyState checks the fallback model with no report at
// all: a resolver that asks again every TTL holds one copy in cache, so its
// rate converges to k; a resolver asking every 4 TTLs holds a copy a
// quarter of the time.
func TestScopeRatesSteadyState(t *testing.T) {
	cases := []struct {
		name   string
		k      float64
		ttl    uint32
		every  time.Duration
		want   float64
		shareA float64 // of scope A (this pattern) against scope B (busy, every TTL)
	}{
		{"busy-default-k", 0, 60, 60 * time.Second, 1, 0.5},
		{"busy-k-5", 5, 60, 60 * time.Second, 5, 0.5},
		{"quarter", 1, 60, 240 * time.Second, 0.25, 0.2},
		{"short-ttl-busy", 1, 10, 10 * time.Second, 1, 0.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScopeRates(ScopeRatesConfig{halfLife: 30 * time.Minute, ratePerCachedAnswer: tc.k})
			t0 := time.Unix(1_700_000_000, 0)
			a, b := scope(1), scope(2)
			end := 6 * time.Hour
			for d := time.Duration(0); d < end; d += time.Duration(tc.ttl) * time.Second {
				if d%tc.every == 0 {
					observe(s, a, tc.ttl, t0.Add(d))
				}
				observe(s, b, tc.ttl, t0.Add(d))
			}
			now := t0.Add(end)
			if got := s.Rate(a, now); math.Abs(got-tc.want) > 0.05*tc.want {
				t.Errorf("Rate = %.4f, want %.4f ± 5%%", got, tc.want)
			}
			if got := s.Rate(a, now) / s.Total(now); math.Abs(got-tc.shareA) > 0.05*tc.shareA {
				t.Errorf("Share = %.4f, want %.4f ± 5%%", got, tc.shareA)
			}
		})
	}
}

func TestScopeRatesConcurrent(t *testing.T) {
	s := NewScopeRates(ScopeRatesConfig{MaxScopes: 64})
	t0 := time.Unix(1_700_000_000, 0)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				observe(s, scope(w*1000+i%100), 30, now)
				_ = s.Peek(scope(i%100), ScopeAnswer{Min: 20, Max: 300, Fair: 4}, now)
				_ = s.Total(now)
				if i%50 == 0 {
					s.Report(w, MemberReport{Requests: 20, GroupRequests: 10, At: now})
				}
			}
		})
	}
	wg.Wait()
	if s.Len() != 64 {
		t.Errorf("Len() = %d, want 64", s.Len())
	}
}

// TestScopeEntryBytes measures the memory of a full ScopeRates against the
// documented ScopeEntryBytes.
func TestScopeEntryBytes(t *testing.T) {
	const n = 1 << 16
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewScopeRates(ScopeRatesConfig{MaxScopes: n})
	now := time.Unix(1_700_000_000, 0)
	for i := range n {
		s.Answer(scope(i), ScopeAnswer{Members: 1<<(i%8) | 1<<(8+i%8), N: 2, Min: 60, Max: 60, Unseen: 60, Fair: 16}, now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.1f bytes per scope", per)
	if per > 1.1*ScopeEntryBytes { // heap figures are a little noisy
		t.Errorf("%.1f bytes per scope, documented %d", per, ScopeEntryBytes)
	}
	runtime.KeepAlive(s)
}

func TestScopeKey(t *testing.T) {
	cases := []struct {
		name string
		a, b string
		same bool
	}{
		{"masked-equal", "192.0.2.7/24", "192.0.2.0/24", true},
		{"different-length", "192.0.2.0/24", "192.0.2.0/25", false},
		{"different-net", "192.0.2.0/24", "192.0.3.0/24", false},
		{"v4-vs-mapped", "192.0.2.1/32", "::ffff:192.0.2.1/128", false},
		{"v6", "2001:db8::/56", "2001:db8:0:100::/56", false},
		{"v6-masked-equal", "2001:db8::1/56", "2001:db8::/56", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := ScopeKey(netip.MustParsePrefix(tc.a)), ScopeKey(netip.MustParsePrefix(tc.b))
			if (a == b) != tc.same {
				t.Errorf("ScopeKey(%s) = %#x, ScopeKey(%s) = %#x, same = %v, want %v", tc.a, a, tc.b, b, a == b, tc.same)
			}
		})
	}
	// Stable across releases: the hash policy depends on it.
	if got, want := fmt.Sprintf("%#x", ScopeKey(netip.MustParsePrefix("192.0.2.0/24"))), scopeKeyGolden; got != want {
		t.Errorf("ScopeKey(192.0.2.0/24) = %s, want %s (changing it moves every client)", got, want)
	}
}

// scopeKeyGolden pins ScopeKey's output.
const scopeKeyGolden = "0x3ffbd2f908481a97"
