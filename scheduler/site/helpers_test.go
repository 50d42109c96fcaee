package site

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"
)

// t0 is the start of every test clock.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// backends returns n up back ends b0..b(n-1) of weight 1 and memory mem.
func backends(n int, mem int64) []Backend {
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Name: fmt.Sprintf("b%d", i), Weight: 1, MemoryBytes: mem, Up: true}
	}
	return bs
}

// mustNew builds a policy or panics; tests pass valid names and params.
func mustNew(name string, p Params, seed uint64) Policy {
	pol, err := New(name, p, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
	if err != nil {
		panic(err)
	}
	return pol
}

// zipf samples ranks 0..n-1 with P(r) ∝ 1/(r+1)^alpha by inverting the
// CDF; math/rand/v2's Zipf needs an exponent above 1.
type zipf struct {
	cdf []float64
}

func newZipf(n int, alpha float64) *zipf {
	z := &zipf{cdf: make([]float64, n)}
	sum := 0.0
	for r := range n {
		sum += 1 / math.Pow(float64(r+1), alpha)
		z.cdf[r] = sum
	}
	for r := range z.cdf {
		z.cdf[r] /= sum
	}
	return z
}

// prob is the probability of rank r.
func (z *zipf) prob(r int) float64 {
	if r == 0 {
		return z.cdf[0]
	}
	return z.cdf[r] - z.cdf[r-1]
}

func (z *zipf) sample(rng *rand.Rand) int {
	i, _ := slices.BinarySearch(z.cdf, rng.Float64())
	return min(i, len(z.cdf)-1)
}

// logNormalSize draws a file size: median 8 KiB, σ = 1.2, within
// [128 B, 4 MiB].
func logNormalSize(rng *rand.Rand) int64 {
	s := math.Exp(math.Log(8<<10) + 1.2*rng.NormFloat64())
	return int64(min(max(s, 128), 4<<20))
}

// randomClient returns a random global-looking IPv4 or IPv6 address.
func randomClient(rng *rand.Rand) netip.Addr {
	if rng.IntN(4) == 0 {
		var b [16]byte
		b[0] = 0x20
		b[1] = 0x01
		for i := 2; i < 16; i++ {
			b[i] = byte(rng.IntN(256))
		}
		return netip.AddrFrom16(b)
	}
	return netip.AddrFrom4([4]byte{byte(1 + rng.IntN(223)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))})
}
