package site

import (
	"math/rand/v2"
	"sync"
	"time"
)

// wrr is the smooth weighted round robin policy; see [WRR].
type wrr struct {
	mu      sync.Mutex
	current aligned[float64] // running score per back end
}

var _ Policy = (*wrr)(nil)

func newWRR() *wrr { return &wrr{} }

func (w *wrr) Name() string { return WRR }

// Pick runs the smooth scores over the back ends that serve the request;
// one that is up but lacks the file (req.Has) keeps its score, as nginx
// skips the peers it tried already.
func (w *wrr) Pick(req Request, bs []Backend, _ time.Time) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.current.sync(bs, nil)
	best, total := -1, 0.0
	for i := range bs {
		b := &bs[i]
		if !b.Up {
			cur[i] = 0 // a back end coming back starts afresh, as in nginx
			continue
		}
		if !serves(bs, req.Has, i) {
			continue
		}
		wt := weight(b)
		cur[i] += wt
		total += wt
		if best < 0 || cur[i] > cur[best] {
			best = i
		}
	}
	if best < 0 {
		return -1, ErrNoBackend
	}
	cur[best] -= total
	return best, nil
}

func (w *wrr) Done(Request, string, time.Time) {}

// leastConn is the least-connections policy; see [LeastConn].
type leastConn struct {
	mu  sync.Mutex // guards rng
	rng *rand.Rand
}

var _ Policy = (*leastConn)(nil)

func (l *leastConn) Name() string { return LeastConn }

func (l *leastConn) Pick(req Request, bs []Backend, _ time.Time) (int, error) {
	l.mu.Lock()
	i, _ := leastLoaded(bs, req.Has, l.rng)
	l.mu.Unlock()
	if i < 0 {
		return -1, ErrNoBackend
	}
	return i, nil
}

func (l *leastConn) Done(Request, string, time.Time) {}
