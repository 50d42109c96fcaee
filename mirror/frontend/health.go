package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/transmirror/transmirror/scheduler/site"
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

// Serving reports whether the front end has a back end to send requests
// to: one that is up, or not checked yet. With none it still tries them
// all (pick fails open), but it should be sent no clients: the mirror says
// so on its health endpoints and stops its load reports (see
// mirror.SiteServing).
func (h *handler) Serving() bool {
	for _, b := range h.backends {
		if b.routable.Load() {
			return true
		}
	}
	return false
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
		if b.reportURL != "" {
			if err := h.fetchReport(ctx, b); err != nil && ctx.Err() == nil {
				h.m.errors.WithLabelValues(b.name, errReport).Inc()
				h.log.Debug("site: back-end report", "backend", b.name, "err", err)
			}
		}
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

// maxReportBody bounds a back end's report (4096 completions of URIs of a
// few hundred bytes).
const maxReportBody = 8 << 20

// fetchReport reads b's report (api.SiteReport) and takes its figures;
// in redirect mode it tells the policy of the requests b completed.
func (h *handler) fetchReport(ctx context.Context, b *backend) error {
	ctx, cancel := context.WithTimeout(ctx, h.health.Timeout.D())
	defer cancel()
	b.rep.mu.Lock()
	after := b.rep.next
	b.rep.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.reportURL+"?after="+strconv.FormatUint(after, 10), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "transmirror-site-report")
	resp, err := h.transport.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("status %s", resp.Status)
	}
	var rep BackendReport
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReportBody)).Decode(&rep); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if rep.InFlight < 0 || rep.CacheMemory < 0 || rep.CacheMaxObject < 0 || !(rep.RequestsPerSecond >= 0) {
		return errors.New("negative or missing figures")
	}
	now := h.now()
	b.rep.mu.Lock()
	b.rep.at = now
	b.rep.inFlight = float64(rep.InFlight)
	b.rep.service = defaultService
	if rep.RequestsPerSecond > 0 {
		w := time.Duration(float64(rep.InFlight) / rep.RequestsPerSecond * float64(time.Second))
		b.rep.service = min(max(w, minService), maxService)
	}
	if b.memory > 0 && rep.CacheMemory != b.memory && !b.rep.warned {
		b.rep.warned = true
		h.log.Warn("site: back end's cache differs from backends[].memory; the policy uses the back end's",
			"backend", b.name, "reported", rep.CacheMemory, "configured", b.memory)
	}
	b.rep.memory, b.rep.maxObject = rep.CacheMemory, rep.CacheMaxObject
	b.rep.next = rep.Next
	// The report counts the redirects that have arrived; the ones still on
	// their way are few next to a report interval: start over.
	b.rep.pending, b.rep.pendingAt = 0, now
	b.rep.mu.Unlock()
	if h.mode == ModeRedirect {
		for _, c := range rep.Completions {
			b.sent.add(c.Size, now)
			h.policy.Done(site.Request{Key: policyKey(c.Key, h.keyQuery), Size: c.Size}, b.name, now)
		}
	}
	return nil
}
