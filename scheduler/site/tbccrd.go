package site

import (
	"math/rand/v2"
	"sync"
	"time"
)

// tbccrd is the tag-based cooperative caching policy; see [TBCCRD].
type tbccrd struct {
	p      Params
	mu     sync.Mutex
	rng    *rand.Rand
	models aligned[*LRUBytes[struct{}]] // one cache model per back end
	// maxObject is each back end's own object limit (Backend.MaxObjectBytes)
	// as of the last pick, by name; absent: Params.MaxObjectBytes.
	maxObject map[string]int64
}

var _ Policy = (*tbccrd)(nil)

func newTBCCRD(p Params, rng *rand.Rand) *tbccrd { return &tbccrd{p: p, rng: rng} }

func (t *tbccrd) Name() string { return TBCCRD }

func (t *tbccrd) fresh(b *Backend) *LRUBytes[struct{}] {
	return NewLRUBytes[struct{}](b.MemoryBytes, t.p.MaxTargets)
}

func (t *tbccrd) Pick(req Request, bs []Backend, _ time.Time) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	models := t.models.sync(bs, t.fresh)
	least, minLoad := leastLoaded(bs, req.Has, t.rng)
	if least < 0 {
		return -1, ErrNoBackend
	}
	if req.Size > t.p.MaxObjectBytes {
		return least, nil // never cached anywhere
	}
	holder, hLoad, ties := -1, 0.0, 0
	for i := range bs {
		if c := max(bs[i].MemoryBytes, 0); models[i].Capacity() != c {
			models[i].SetCapacity(c)
		}
		if m := bs[i].MaxObjectBytes; m > 0 && t.maxObject[bs[i].Name] != m {
			if t.maxObject == nil {
				t.maxObject = make(map[string]int64)
			}
			t.maxObject[bs[i].Name] = m
		}
		if !serves(bs, req.Has, i) || !models[i].Contains(req.Key) {
			continue
		}
		switch ld := load(&bs[i]); {
		case holder < 0 || ld < hLoad:
			holder, hLoad, ties = i, ld, 1
		case ld == hLoad:
			ties++
			if t.rng.IntN(ties) == 0 {
				holder = i
			}
		}
	}
	if holder >= 0 && !overloaded(hLoad, minLoad, &t.p) {
		return holder, nil
	}
	return least, nil
}

// Done records that backend now caches req.Key (req.Size bytes), as its
// LRU cache would after serving it: the key becomes its most recently
// used entry and older entries are evicted to fit MemoryBytes.
func (t *tbccrd) Done(req Request, backend string, _ time.Time) {
	if req.Size <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := t.p.MaxObjectBytes
	if m, ok := t.maxObject[backend]; ok {
		limit = m
	}
	if req.Size > limit {
		return
	}
	for i, name := range t.models.names {
		if name == backend {
			t.models.vals[i].Add(req.Key, struct{}{}, req.Size)
			return
		}
	}
}
