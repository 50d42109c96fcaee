package content

import (
	"fmt"
	"io"
	"sync"
)

// Replica is this mirror's copy of a sibling's index, kept current from
// what the sibling's Handler sends: a full index or a change set. An
// update that is malformed, hostile or inconsistent is refused whole and
// the copy stays as it was.
type Replica struct {
	lim Limits

	mu  sync.Mutex
	cur *Index
}

// NewReplica returns an empty Replica (at version 0) that accepts what
// lim bounds.
func NewReplica(lim Limits) *Replica {
	return &Replica{lim: lim.withDefaults(), cur: &Index{}}
}

// Index returns the copy as it is.
func (r *Replica) Index() *Index {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Version is the since= of the next request: the copy's version, 0 for
// none yet (which every Handler answers with the full index).
func (r *Replica) Version() uint64 { return r.Index().Version() }

// Update reads a full index or a change set from body and makes it the
// copy: a full index replaces it, a change set must start at its version
// and is applied to it (see Apply). On any error the copy is unchanged.
func (r *Replica) Update(body io.Reader) error {
	old := r.Index()
	d := newDecoder(body, r.lim)
	h, err := d.header()
	if err != nil {
		return err
	}
	var next *Index
	if h.kind == kindFull {
		next, err = d.index(h)
	} else {
		var ch Changes
		if ch, err = d.changes(h); err == nil {
			next, err = Apply(old, ch, r.lim.MaxFiles)
		}
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != old {
		return fmt.Errorf("%w: the copy changed during the update", ErrVersion)
	}
	r.cur = next
	return nil
}
