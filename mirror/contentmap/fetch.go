package contentmap

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/probe"
)

// outcome is what one fetch did: the reason label of a failure ("" for
// none), and how long to wait before the next one (0: the interval).
type outcome struct {
	reason string
	err    error // what went wrong, for the log
	wait   time.Duration
	ok     bool // the copy is the member's index (200 applied, or 304)
	none   bool // 404: the member keeps no index
}

// fetch asks mb for the changes since its copy's version and applies
// them, then schedules its next fetch.
func (m *Map) fetch(ctx context.Context, mb *member) {
	out := m.get(ctx, mb)
	if ctx.Err() != nil { // dnsd stops: no error, no schedule
		m.mu.Lock()
		mb.done = nil
		m.mu.Unlock()
		return
	}
	if out.reason != "" {
		m.metrics.failed(mb.spec.Group, out.reason)
	}
	m.noteOutcome(mb, out)
	wait := out.wait
	if wait <= 0 {
		wait = m.o.Interval
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mb.done = nil
	mb.known = mb.known || out.ok
	if out.none { // no index: its contents are unknown until it has one
		mb.known = false
		mb.replica = content.NewReplica(m.o.Limits)
	}
	mb.next = m.o.Now().Add(wait + time.Duration(m.o.Rand.Int64N(int64(m.o.Jitter)+1)))
}

// get makes one request of mb's index and applies its answer to mb's
// copy; a refused answer leaves the copy as it was.
func (m *Map) get(ctx context.Context, mb *member) outcome {
	ctx, cancel := context.WithTimeout(ctx, m.o.Timeout)
	defer cancel()
	if mb.spec.PublicOnly {
		ctx = probe.PublicOnly(ctx)
	}
	rep := mb.replica
	v := rep.Version()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, mb.url+"?since="+strconv.FormatUint(v, 10), nil)
	if err != nil {
		return outcome{reason: ReasonConnect, err: err}
	}
	if v > 0 {
		req.Header.Set("If-None-Match", `"`+strconv.FormatUint(v, 10)+`"`)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := m.o.Client.Do(req)
	if err != nil {
		return outcome{reason: ReasonConnect, err: err}
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return m.apply(rep, resp)
	case http.StatusNotModified:
		return outcome{ok: true}
	case http.StatusNotFound:
		return outcome{none: true, wait: m.o.NotFoundBackoff}
	case http.StatusTooManyRequests:
		return outcome{reason: ReasonRateLimited, wait: retryAfter(resp.Header.Get("Retry-After"), m.o.Interval)}
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return outcome{reason: ReasonStatus, err: fmt.Errorf("status %s", resp.Status)}
}

// apply reads a 200 answer, gzipped or not, into rep.
func (m *Map) apply(rep *content.Replica, resp *http.Response) outcome {
	body := io.Reader(resp.Body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return outcome{reason: ReasonRefused, err: err}
		}
		defer zr.Close()
		body = zr
	}
	if err := rep.Update(body); err != nil {
		if ctxErr := resp.Request.Context().Err(); ctxErr != nil {
			return outcome{reason: ReasonConnect, err: ctxErr}
		}
		return outcome{reason: ReasonRefused, err: err}
	}
	return outcome{ok: true}
}

// retryAfter is a Retry-After of seconds, at least min and at most an
// hour; min when it is not a number.
func retryAfter(s string, least time.Duration) time.Duration {
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return least
	}
	return min(max(time.Duration(n)*time.Second, least), time.Hour)
}

// noteOutcome logs a member's fetches going wrong, once, with why (a 429
// is the member's rate limit working: not logged), and their coming
// right again.
func (m *Map) noteOutcome(mb *member, out outcome) {
	if out.reason == ReasonRateLimited {
		return // neither wrong nor right: as before
	}
	m.mu.Lock()
	was := mb.failing
	mb.failing = out.reason != ""
	m.mu.Unlock()
	switch {
	case mb.failing && !was:
		m.o.Logger.Warn("content map: a member's index can not be used; the last good copy stays", "group", mb.spec.Group,
			"member", mb.spec.Name, "url", mb.url, "reason", out.reason, "err", out.err)
	case was && out.ok:
		m.o.Logger.Info("content map: a member's index is fetched again", "group", mb.spec.Group, "member", mb.spec.Name)
	}
}
