package frontend

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/transmirror/transmirror/scheduler/site"
)

// Admission: LARD's front end bounds the requests outstanding on the
// back ends at S = (n−1)·T_high + T_low − 1 and holds the rest in a queue
// (Pai et al. 1998, §2.3): with more in flight the thresholds lose their
// meaning, since every back end could be above T_high at once. A request
// takes a slot before the policy picks its back end and gives it back
// when it completes (in handoff mode: when the back end reports its
// end); a waiting request gets the slot of the first one to complete, in
// arrival order. Further requests of a handed-off connection, which the
// back end serves without asking, take a slot without waiting. Redirect
// mode has no admission limit: the front end is out of the way as soon
// as the 302 is written.

// Errors of admit, answered with 503.
var (
	errQueueFull = errors.New("frontend: admission queue full")
	errQueueWait = errors.New("frontend: waited too long for admission")
)

// Defaults of site.admission.
const (
	DefaultAdmissionQueue   = 4096
	DefaultAdmissionMaxWait = 10 * time.Second
)

// newAdmission returns the admission of a front end with cfg and
// backends (metrics are set by New). Left out, the limit is the
// policy's own (site.AdmissionLimit: LARD's S for lard, lard-r and
// tb-ccrd, none for the others).
func newAdmission(cfg Config, backends []Backend) *admission {
	a := &admission{limit: cfg.Admission.Limit, queue: cfg.Admission.Queue, maxWait: cfg.Admission.MaxWait.D()}
	if a.maxWait <= 0 {
		a.maxWait = DefaultAdmissionMaxWait
	}
	if cfg.Admission.Queue == 0 && cfg.Admission.MaxWait == 0 {
		a.queue = DefaultAdmissionQueue // a Config that did not go through Check
	}
	switch {
	case cfg.Mode == ModeRedirect, a.limit < 0:
		a.limit = 0
	case a.limit == 0:
		name := cfg.Policy.Name
		if name == "" {
			name = DefaultPolicy
		}
		a.limit = site.AdmissionLimit(name, cfg.Policy.Params(), weightSum(backends)/DefaultWeight)
	}
	return a
}

// weightSum is the sum of the back ends' weights, or DefaultWeight each
// when none has one.
func weightSum(backends []Backend) float64 {
	w := 0.0
	for _, b := range backends {
		w += max(b.Weight, 0)
	}
	if w == 0 {
		w = float64(len(backends)) * DefaultWeight
	}
	return w
}

// admission is the front end's slots and queue; limit ≤ 0 admits
// everything at once.
type admission struct {
	limit   int
	queue   int
	maxWait time.Duration
	m       *metrics

	mu      sync.Mutex
	used    int
	waiting list.List // of chan struct{}: closed when given a slot
}

// admit takes a slot, waiting in the queue if none is free, until ctx is
// done or maxWait has passed.
func (a *admission) admit(ctx context.Context) error {
	a.mu.Lock()
	if a.limit <= 0 || a.used < a.limit {
		a.used++
		a.mu.Unlock()
		return nil
	}
	if a.waiting.Len() >= a.queue {
		a.mu.Unlock()
		a.m.queueRejected.WithLabelValues(queueFull).Inc()
		return errQueueFull
	}
	ch := make(chan struct{})
	e := a.waiting.PushBack(ch)
	a.m.queued.Inc()
	a.mu.Unlock()

	start := time.Now()
	t := time.NewTimer(a.maxWait)
	defer t.Stop()
	var err error
	select {
	case <-ch:
	case <-t.C:
		err = errQueueWait
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		a.mu.Lock()
		select {
		case <-ch: // handed a slot just now: keep it
			err = nil
		default:
			a.waiting.Remove(e)
			a.m.queued.Dec()
		}
		a.mu.Unlock()
	}
	a.m.queueWait.Observe(time.Since(start).Seconds())
	if err != nil {
		reason := queueTimeout
		if ctx.Err() != nil {
			reason = queueGone
		}
		a.m.queueRejected.WithLabelValues(reason).Inc()
	}
	return err
}

// take takes a slot without waiting, over the limit if need be.
func (a *admission) take() {
	a.mu.Lock()
	a.used++
	a.mu.Unlock()
}

// done gives a slot back: to the first request waiting, if any.
func (a *admission) done() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.limit > 0 && a.used <= a.limit {
		if e := a.waiting.Front(); e != nil {
			a.waiting.Remove(e)
			a.m.queued.Dec()
			close(e.Value.(chan struct{}))
			return // the slot passes on: used stays
		}
	}
	a.used--
}

// state returns the slots in use and the requests waiting.
func (a *admission) state() (used, waiting int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.used, a.waiting.Len()
}

// slot is one request's admission, given back once.
type slot struct {
	a    *admission
	held bool
}

// release gives the slot back, the first time only.
func (s *slot) release() {
	if s != nil && s.held {
		s.held = false
		s.a.done()
	}
}
