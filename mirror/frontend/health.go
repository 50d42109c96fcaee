package frontend

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// healthState is a back end's health as the front end sees it.
type healthState int8

// The health states. A new back end is healthUnknown, which takes
// requests: a site whose back ends all start unknown serves from the
// first request instead of waiting rise intervals.
const (
	healthUnknown healthState = iota // no verdict yet; takes requests
	healthUp                         // takes requests
	healthDown                       // takes none (unless all are down)
)

var healthNames = [...]string{healthUnknown: "unknown", healthUp: "up", healthDown: "down"}

func (s healthState) String() string { return healthNames[s] }

// backendHealth is the hysteresis of one back end: active checks and
// passive errors each have their own run of consecutive results.
//
//   - unknown → up after the first successful check (a new back end is
//     trusted as soon as it answers once); unknown → down after fall
//     failed checks or passive_errors failed requests in a row.
//   - up → down after fall failed checks in a row, or passive_errors
//     failed requests in a row (any response resets that run).
//   - down → up after rise successful checks in a row; requests never
//     bring a back end up, only checks do.
type backendHealth struct {
	rise, fall, passive int

	mu        sync.Mutex
	state     healthState
	okRun     int // consecutive successful checks
	failRun   int // consecutive failed checks
	errRun    int // consecutive failed requests
	lastError string
}

// check records an active check's result and returns the state before
// and after.
func (h *backendHealth) check(ok bool, reason string) (from, to healthState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	from = h.state
	if ok {
		h.failRun = 0
		h.okRun++
		if h.state == healthUnknown || h.state == healthDown && h.okRun >= h.rise {
			h.state, h.errRun = healthUp, 0
		}
	} else {
		h.okRun = 0
		h.failRun++
		h.lastError = reason
		if h.state != healthDown && h.failRun >= h.fall {
			h.state = healthDown
		}
	}
	return from, h.state
}

// request records a proxied request's result (ok: a response came back)
// and returns the state before and after.
func (h *backendHealth) request(ok bool, reason string) (from, to healthState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	from = h.state
	if ok {
		h.errRun = 0
		return from, from
	}
	h.errRun++
	h.lastError = reason
	if h.passive > 0 && h.state != healthDown && h.errRun >= h.passive {
		h.state, h.okRun = healthDown, 0
	}
	return from, h.state
}

// runHealthChecks checks b every interval until ctx is done, one check at
// a time, the first one at once.
func (h *handler) runHealthChecks(ctx context.Context, b *backend) {
	t := time.NewTicker(h.health.Interval.D())
	defer t.Stop()
	for {
		ok, reason := h.checkOnce(ctx, b)
		if ctx.Err() != nil {
			return
		}
		if !ok {
			h.m.errors.WithLabelValues(b.name, errHealth).Inc()
		}
		h.transition(b, "check", reason)(b.health.check(ok, reason))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkOnce GETs health.path on b with health.timeout; a 2xx answer is a
// success. The body is read (at most 64 KiB) so the connection is reused.
func (h *handler) checkOnce(ctx context.Context, b *backend) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, h.health.Timeout.D())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.checkURL, nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "transmirror-site-health")
	resp, err := h.transport.RoundTrip(req)
	if err != nil {
		return false, errKind(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false, "status " + resp.Status
	}
	return true, ""
}

// transition returns a function that applies a state change of b: it
// updates the routing flag and the metrics and logs the flip, once.
func (h *handler) transition(b *backend, cause, reason string) func(from, to healthState) {
	return func(from, to healthState) {
		if from == to {
			return
		}
		// Flips from checks and from requests race: publish the state as
		// it is now, under the lock, so the last one wins everywhere.
		b.health.mu.Lock()
		now := b.health.state
		b.routable.Store(now != healthDown)
		up := 1.0 // unknown takes requests too
		if now == healthDown {
			up = 0
		}
		h.m.up.WithLabelValues(b.name).Set(up)
		b.health.mu.Unlock()
		h.m.changes.WithLabelValues(b.name, to.String()).Inc()
		if to == healthDown {
			h.log.Warn("back end down", "backend", b.name, "cause", cause, "reason", reason, "from", from.String())
		} else {
			h.log.Info("back end "+to.String(), "backend", b.name, "cause", cause, "from", from.String())
		}
	}
}
