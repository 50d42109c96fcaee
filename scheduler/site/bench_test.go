package site

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkPickDone measures one Pick and one Done per operation on a
// Zipf(0.8) stream over 20,000 keys, with 16 requests in flight; the
// has=half cases give every request a Request.Has in which half of the
// back ends lack the file.
func BenchmarkPickDone(b *testing.B) {
	const inFlight = 16
	rng := rand.New(rand.NewPCG(1, 1))
	z := newZipf(20_000, 0.8)
	keys := make([]string, 20_000)
	sizes := make([]int64, len(keys))
	for i := range keys {
		keys[i] = fmt.Sprintf("/pub/mirror/dist/%05d/file.tar.gz", i)
		sizes[i] = logNormalSize(rng)
	}
	reqs := make([]Request, 1<<14)
	for i := range reqs {
		f := z.sample(rng)
		reqs[i] = Request{Key: keys[f], Client: randomClient(rng), Size: sizes[f]}
	}
	for _, name := range Names() {
		for _, c := range []struct {
			n    int
			half bool
		}{{4, false}, {32, false}, {4, true}} {
			n, sub := c.n, fmt.Sprintf("%s/backends=%d", name, c.n)
			var has []bool
			if c.half {
				has, sub = make([]bool, n), sub+"/has=half"
				for i := range has {
					has[i] = i%2 == 0
				}
			}
			b.Run(sub, func(b *testing.B) {
				pol := mustNew(name, Params{}, 3)
				bs := backends(n, 64<<20)
				var ring [inFlight]struct {
					req     Request
					backend int
				}
				now := t0
				b.ReportAllocs()
				k := 0
				for b.Loop() {
					now = now.Add(time.Millisecond)
					req := reqs[k&(len(reqs)-1)]
					req.Has = has
					i, err := pol.Pick(req, bs, now)
					if err != nil {
						b.Fatal(err)
					}
					bs[i].Active++
					slot := &ring[k%inFlight]
					if k >= inFlight {
						bs[slot.backend].Active--
						pol.Done(slot.req, bs[slot.backend].Name, now)
					}
					slot.req, slot.backend = req, i
					k++
				}
			})
		}
	}
}
