package admin

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// Refused writes.
//
// A write of the groups API that is refused before it is looked at (no
// signature or a bad one, a stale or replayed one, a wrong admin token,
// a group without a secret) is counted in
// transmirror_dnsd_signed_refused_total{route,reason} and logged at Warn,
// at most one line per route and reason every RefusedLogEvery, that line
// saying how many it stands for. Accepted writes are counted by the
// secret that signed them in transmirror_dnsd_signed_requests_total; the
// pushes' refusals for what they say (a stale report, an unknown member)
// in transmirror_dnsd_reports_refused_total.

// RefusedLogEvery is the least time between two log lines about refused
// writes of one route for one reason.
const RefusedLogEvery = 10 * time.Second

// Reasons a write is refused, the reason label of
// transmirror_dnsd_signed_refused_total.
const (
	RefusedUnsigned     = "unsigned"      // no signature, no token
	RefusedMalformed    = "malformed"     // a signature header that does not parse
	RefusedBadSignature = "bad_signature" // forged, or made with another group's secret
	RefusedStale        = "stale"         // a timestamp older than the window
	RefusedFuture       = "future"        // a timestamp ahead of the window
	RefusedReplayed     = "replayed"      // a signature already accepted
	RefusedCacheFull    = "replay_cache_full"
	RefusedBadToken     = "bad_token"     // a wrong admin token, or none configured
	RefusedNoSecret     = "no_secret"     // the group has no secret: nothing can be signed
	RefusedUnknownGroup = "unknown_group" // no such group to check a signature against
	RefusedTooLarge     = "too_large"     // a body over MaxBody
	RefusedOther        = "other"
)

// RefusedReasons are the values of the reason label.
var RefusedReasons = [...]string{
	RefusedUnsigned, RefusedMalformed, RefusedBadSignature, RefusedStale, RefusedFuture,
	RefusedReplayed, RefusedCacheFull, RefusedBadToken, RefusedNoSecret, RefusedUnknownGroup,
	RefusedTooLarge, RefusedOther,
}

// refusedRoutes are the signed routes and their route label.
var refusedRoutes = map[api.Route]string{
	api.AddMember:     "add_member",
	api.RemoveMember:  "remove_member",
	api.PushLoad:      "push_load",
	api.PushRedirects: "push_redirects",
	api.DrainMember:   "drain_member",
	api.UndrainMember: "undrain_member",
	// The ACME challenge routes.
	api.PublishChallenge: "publish_challenge",
	api.RemoveChallenge:  "remove_challenge",
}

// refusedReason is the reason label of err, a write's refusal.
func refusedReason(err error) string {
	switch {
	case errors.Is(err, api.ErrNoSignature):
		return RefusedUnsigned
	case errors.Is(err, api.ErrMalformedSignature):
		return RefusedMalformed
	case errors.Is(err, api.ErrBadSignature):
		return RefusedBadSignature
	case errors.Is(err, api.ErrSignatureExpired):
		return RefusedStale
	case errors.Is(err, api.ErrSignatureFuture):
		return RefusedFuture
	case errors.Is(err, api.ErrReplayed):
		return RefusedReplayed
	case errors.Is(err, api.ErrReplayCacheFull):
		return RefusedCacheFull
	case errors.Is(err, errBadToken):
		return RefusedBadToken
	case errors.Is(err, members.ErrNoSecret):
		return RefusedNoSecret
	case errors.Is(err, dnsd.ErrUnknownGroup), errors.Is(err, zones.ErrUnknownGroup):
		return RefusedUnknownGroup
	case errors.Is(err, probe.ErrReportTooLarge):
		return RefusedTooLarge
	}
	return RefusedOther
}

// errBadToken is the refusal of a drain or undrain with a wrong admin
// token, or a token when none is configured.
var errBadToken = errors.New("admin: wrong admin token")

// NewSignedRefused returns transmirror_dnsd_signed_refused_total,
// registered with reg, for Options.SignedRefused, every route and reason
// present at 0.
func NewSignedRefused(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "signed_refused_total",
		Help: "Admin API writes refused before they were looked at, by route (add_member, remove_member, push_load, push_redirects, drain_member, undrain_member, publish_challenge, remove_challenge) and reason (unsigned, malformed, bad_signature, stale, future, replayed, replay_cache_full, bad_token, no_secret, unknown_group, too_large, other).",
	}, []string{"route", "reason"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("admin: register metrics: %w", err)
	}
	for _, route := range refusedRoutes {
		for _, reason := range RefusedReasons {
			c.WithLabelValues(route, reason)
		}
	}
	return c, nil
}

// refusals counts and logs refused writes (see above).
type refusals struct {
	counter *prometheus.CounterVec // nil: not counted
	logger  *slog.Logger
	now     func() time.Time

	mu   sync.Mutex
	last map[refusalKey]*refusalLine
}

type refusalKey struct{ route, reason string }

// refusalLine is when the key was last logged and how many refusals
// were not logged since.
type refusalLine struct {
	at         time.Time
	suppressed int
}

func newRefusals(counter *prometheus.CounterVec, logger *slog.Logger, now func() time.Time) *refusals {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &refusals{counter: counter, logger: logger, now: now, last: make(map[refusalKey]*refusalLine)}
}

// refuse counts r's refusal for err on route and logs it unless a line
// about the same route and reason went out less than RefusedLogEvery ago.
func (f *refusals) refuse(route api.Route, r *http.Request, err error) {
	k := refusalKey{refusedRoutes[route], refusedReason(err)}
	if k.route == "" {
		k.route = "other"
	}
	if f.counter != nil {
		f.counter.WithLabelValues(k.route, k.reason).Inc()
	}
	now := f.now()
	f.mu.Lock()
	l := f.last[k]
	if l != nil && now.Sub(l.at) < RefusedLogEvery {
		l.suppressed++
		f.mu.Unlock()
		return
	}
	suppressed := 0
	if l != nil {
		suppressed = l.suppressed
	}
	f.last[k] = &refusalLine{at: now}
	f.mu.Unlock()
	f.logger.Warn("admin write refused", "route", k.route, "reason", k.reason,
		"group", r.PathValue(api.GroupParam), "remote", r.RemoteAddr, "err", err,
		"suppressed", suppressed, "suppressed_for", RefusedLogEvery)
}
