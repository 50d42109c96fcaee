package sitesim

import "time"

// bins counts the counted requests' completions by time bin.
type bins struct {
	width    int64 // ns; 0: no bins
	backends int
	bins     []Bin
	hits     []int
}

// add counts rq, which completed at t from the end of the warm-up, in
// the bin (Start, Start+width] that holds t (the first for t = 0).
func (b *bins) add(t int64, rq *request) {
	if b.width <= 0 {
		return
	}
	i := int(max((t+b.width-1)/b.width-1, 0))
	for len(b.bins) <= i {
		b.bins = append(b.bins, Bin{Start: time.Duration(int64(len(b.bins)) * b.width), PerBackend: make([]int, b.backends)})
		b.hits = append(b.hits, 0)
	}
	b.bins[i].Requests++
	b.bins[i].PerBackend[rq.backend]++
	if rq.hit {
		b.hits[i]++
	}
}

// result fills in each bin's rates, the last bin ending at elapsed.
func (b *bins) result(elapsed time.Duration) []Bin {
	for i := range b.bins {
		bin := &b.bins[i]
		if w := min(time.Duration(b.width), elapsed-bin.Start); w > 0 {
			bin.Throughput = float64(bin.Requests) / w.Seconds()
		}
		if bin.Requests > 0 {
			bin.HitRatio = float64(b.hits[i]) / float64(bin.Requests)
		}
		bin.MaxOverMean, bin.CV = spread(bin.PerBackend)
	}
	return b.bins
}
