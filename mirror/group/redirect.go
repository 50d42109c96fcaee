package group

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler"
	"github.com/transmirror/transmirror/scheduler/geo"
)

// Action is what Decide says to do with a request.
type Action int

// Actions of a Decision.
const (
	// Serve hands the request to the content handler.
	Serve Action = iota
	// Redirect answers 302 Found to the same path on Decision.Target.
	Redirect
	// Refuse answers Decision.Status without content (a dispatcher, which
	// has none, for a request it can not redirect).
	Refuse
)

// String returns the action's name.
func (a Action) String() string {
	switch a {
	case Serve:
		return "serve"
	case Redirect:
		return "redirect"
	case Refuse:
		return "refuse"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Reasons of a Decision: a bounded set, the label values of the redirect
// metrics.
const (
	// ReasonOtherHost: the Host is not the group name (e.g. this mirror's
	// own host name): always served, which makes redirects loop-free.
	ReasonOtherHost = "other_host"
	// ReasonMethod: not GET or HEAD.
	ReasonMethod = "method"
	// ReasonDisabled: redirect.enabled is false.
	ReasonDisabled = "disabled"
	// ReasonNever: the path is listed in redirect.never.
	ReasonNever = "never"
	// ReasonSmall: the file is smaller than redirect.min_size.
	ReasonSmall = "small"
	// ReasonBelowWatermark: the utilization is at or below the low
	// watermark (the watermark law).
	ReasonBelowWatermark = "below_watermark"
	// ReasonBelowTarget: what comes in is within the mirror's target (the
	// fair-share law).
	ReasonBelowTarget = "below_target"
	// ReasonDraw: the random draw fell outside the redirected share.
	ReasonDraw = "draw"
	// ReasonNoView: no group view yet.
	ReasonNoView = "no_view"
	// ReasonStaleView: the group view is older than StaleViews intervals.
	ReasonStaleView = "stale_view"
	// ReasonExpiredView: a dispatcher's group view is older than
	// ExpiredViews intervals (503).
	ReasonExpiredView = "expired_view"
	// ReasonNoSibling: no sibling below its high watermark (the watermark
	// law) or its target (the fair-share law); a dispatcher: no member at
	// all.
	ReasonNoSibling = "no_sibling"
	// ReasonOverload: redirected because this mirror is over its target
	// (or low watermark) and the draw said so.
	ReasonOverload = "overload"
	// ReasonDispatch: redirected by a dispatcher.
	ReasonDispatch = "dispatch"
	// ReasonOwnHost: a dispatcher asked for its own host name, where it
	// has nothing to serve (404).
	ReasonOwnHost = "own_host"
	// ReasonMisdirected: a dispatcher asked for a host it does not answer
	// for (421).
	ReasonMisdirected = "misdirected"
	// ReasonRescue: redirected because this mirror lacks the file or holds
	// an older copy of it, to a sibling that holds the best copy, instead
	// of a 404 or stale bytes.
	ReasonRescue = "rescue"
	// ReasonNoCopy: no member in the view holds the file's best copy: a
	// mirror serves what it has (a 404 when nothing), a dispatcher answers
	// 404.
	ReasonNoCopy = "no_copy"
)

// RedirectRules are the static inputs of the redirect decision, from the
// configuration.
type RedirectRules struct {
	// Group is the group host name; only requests on it are redirected.
	Group string
	// Host is this mirror's own host name.
	Host string
	// Dispatcher redirects every GET and HEAD on the group name (share
	// 100%, no never paths, no size rule) and serves nothing itself.
	Dispatcher bool
	// Enabled turns redirects on (a dispatcher ignores it).
	Enabled bool
	// Law is how the redirected share is decided: LawFairShare (also for
	// "") or LawWatermark.
	Law string
	// LowWatermark, HighWatermark and MaxShare shape the redirected share:
	// see FairShareRedirect and Target for the fair-share law, where the
	// high watermark is not used, and RedirectShare for the watermark law.
	// The watermarks are the group's: the Redirector takes them from the
	// group view (GroupSnapshot.Watermarks) when both are 0, as the
	// mirror's config leaves them (WithWatermarks); rules that set them
	// (simulations, tests) keep their own.
	LowWatermark, HighWatermark, MaxShare float64
	// MinSize is the smallest file redirected, when its size is known.
	MinSize int64
	// Never are request paths never redirected (exact match).
	Never []string
	// Scheme is the scheme of the Location: SchemeHTTP, SchemeHTTPS, or
	// SchemeAuto or "" for the request's (RequestScheme).
	Scheme string
	// TrustedProxies are the peers whose Forwarded and X-Forwarded-*
	// headers are believed, for the scheme and for the client's address
	// that locates it (ForwardedOf); nil believes no one.
	TrustedProxies []netip.Prefix
	// InPlace are the paths whose files change in place by design
	// (content.in_place, see AnyCopyPath): any member's copy serves them.
	InPlace []string
}

// WithWatermarks returns rules with the group's watermarks of snap
// (GroupSnapshot.Watermarks: the view's, the scheduler's defaults
// without a view) when rules have none of their own (both 0).
func (rules RedirectRules) WithWatermarks(snap *GroupSnapshot) RedirectRules {
	if rules.LowWatermark == 0 && rules.HighWatermark == 0 {
		rules.LowWatermark, rules.HighWatermark = snap.Watermarks()
	}
	return rules
}

// RedirectShare is the share of the redirectable requests that a mirror
// at utilization u redirects: 0 up to the low watermark, rising linearly
// to MaxShare at the high watermark, MaxShare above it:
//
//	share(u) = 0                                    u ≤ low
//	         = max_share · (u − low) / (high − low)  low < u < high
//	         = max_share                            u ≥ high
//
// With low = high it is a step from 0 to max_share. A dispatcher's share
// is 1.
func RedirectShare(rules RedirectRules, u float64) float64 {
	switch {
	case rules.Dispatcher:
		return 1
	case !(u > rules.LowWatermark):
		return 0
	case u >= rules.HighWatermark:
		return rules.MaxShare
	}
	return rules.MaxShare * (u - rules.LowWatermark) / (rules.HighWatermark - rules.LowWatermark)
}

// RedirectRequest is what the decision needs to know about one request.
// The functions are asked only when the decision gets that far, so that a
// request that is served anyway costs no stat and no geo lookup.
type RedirectRequest struct {
	// Method is the request method.
	Method string
	// Host is the Host header (a port and a trailing dot are allowed).
	Host string
	// Path is the decoded request path (r.URL.Path).
	Path string
	// Size returns the size of the file the path names and whether it is
	// known; nil means unknown (a site front end), which skips the
	// min_size rule.
	Size func() (int64, bool)
	// Client returns who the client is, for choosing a sibling near it;
	// nil means the unknown location.
	Client func() scheduler.Client
	// Need is what a sibling must offer this request (api.NeedOf: its scheme
	// and the client's family); 0: anything.
	Need api.Offers
	// Holdings returns which members hold the path's best copy, and
	// whether this mirror does (from the members' content indexes); nil,
	// or Holdings that are not Known, means every member holds every
	// file.
	Holdings func() (h Holdings, self bool)
}

// Decision is the outcome of Decide.
type Decision struct {
	// Action is what to do.
	Action Action
	// Target is the sibling's host name, for Redirect.
	Target string
	// Member is the sibling's member name, for Redirect: the redirect is
	// booked on it (GroupSnapshot.Book) and counted by it.
	Member string
	// Status is the status code, for Refuse.
	Status int
	// Reason is why, one of the Reason constants.
	Reason string
}

// Decide decides what to do with one request, purely from its inputs:
// the rules, the request, the share of the redirectable requests to
// redirect with the serving utilization a sibling must be below to be
// sent one (asked only of a redirectable request: FairShareRedirect and
// SiblingLimit, or RedirectShare, see Redirector), the group snapshot
// (nil: none yet)
// with the redirects booked on it so far, the time and the randomness.
// It books nothing itself: the caller books the redirect it carries out
// (Redirector.ServeHTTP does, on the same snapshot).
//
// A mirror serves every request that did not come in on the group name,
// every method but GET and HEAD, the never paths and files smaller than
// min_size. Of the rest, the redirectable requests, it redirects the
// share: a draw from rnd in [0, 1) below the share redirects. The sibling
// is chosen with the group's own policy (the scheduler code that dnsd
// runs) for the client's location, among the members that are up or
// unknown and not this mirror: under the fair-share law the first in the
// policy's order that is below the limit (GroupSnapshot.PickBelow), under
// the watermark law the first below the policy's high watermark.
// With no view, a stale view or no such sibling the request is served
// rather than sent into overload.
//
// A dispatcher redirects every GET and HEAD on the group name to the best
// member for the client; when all are above the high watermark it still
// sends the client to the policy's first choice, and it uses a stale view
// rather than none, but not an expired one (older than ExpiredViews
// intervals: the members it lists may have been drained or removed since,
// and a 503 with Retry-After tells the client to come back where
// redirecting on it would send it to a member that may no longer serve).
// It refuses what it can not redirect: 503 without a view, with an
// expired view or without a member, 405 for other methods, 404 on its own
// host name and 421 on any other.
//
// When the request knows which members hold the path's best copy
// (RedirectRequest.Holdings), every redirect goes to one of them only; a
// mirror that lacks the file or holds an older copy sends the request to
// one that has it (ReasonRescue, see rescue), and a file that no member
// in the view holds is served here, a 404, or refused with 404 by a
// dispatcher (ReasonNoCopy).
func Decide(rules RedirectRules, req RedirectRequest, share func() Share, snap *GroupSnapshot, now time.Time, rnd *rand.Rand) Decision {
	onGroup := hostMatches(req.Host, rules.Group)
	get := req.Method == http.MethodGet || req.Method == http.MethodHead
	if rules.Dispatcher {
		return decideDispatch(rules, req, onGroup, get, snap, now, rnd)
	}
	switch {
	case !onGroup:
		return Decision{Action: Serve, Reason: ReasonOtherHost}
	case !get:
		return Decision{Action: Serve, Reason: ReasonMethod}
	case !rules.Enabled:
		return Decision{Action: Serve, Reason: ReasonDisabled}
	case slices.Contains(rules.Never, req.Path):
		return Decision{Action: Serve, Reason: ReasonNever}
	}
	holds, d, done := rescue(req, snap, now, rnd)
	if done {
		return d
	}
	if rules.MinSize > 0 && req.Size != nil {
		if n, ok := req.Size(); ok && n < rules.MinSize {
			return Decision{Action: Serve, Reason: ReasonSmall}
		}
	}
	sh := share()
	p := sh.P
	switch {
	case !(p > 0) && rules.Law == LawWatermark:
		return Decision{Action: Serve, Reason: ReasonBelowWatermark}
	case !(p > 0):
		return Decision{Action: Serve, Reason: ReasonBelowTarget}
	case p < 1 && rnd.Float64() >= p:
		return Decision{Action: Serve, Reason: ReasonDraw}
	}
	switch {
	case snap == nil:
		return Decision{Action: Serve, Reason: ReasonNoView}
	case snap.Stale(now):
		return Decision{Action: Serve, Reason: ReasonStaleView}
	}
	var host, member string
	var ok bool
	q := pickQuery{client: clientOf(req), rnd: rnd, now: now, holds: holds, need: req.Need}
	if rules.Law != LawWatermark {
		q.serving, q.limit = true, sh.Limit
	}
	host, member, ok = snap.pick(q)
	if !ok && sh.Over && q.serving {
		q.noisy = true
		host, member, ok = snap.pick(q)
	}
	if !ok {
		return Decision{Action: Serve, Reason: ReasonNoSibling}
	}
	return Decision{Action: Redirect, Target: host, Member: member, Reason: ReasonOverload}
}

// decideDispatch is Decide for a dispatcher.
func decideDispatch(rules RedirectRules, req RedirectRequest, onGroup, get bool, snap *GroupSnapshot, now time.Time, rnd *rand.Rand) Decision {
	switch {
	case !onGroup && hostMatches(req.Host, rules.Host):
		return Decision{Action: Refuse, Status: http.StatusNotFound, Reason: ReasonOwnHost}
	case !onGroup:
		return Decision{Action: Refuse, Status: http.StatusMisdirectedRequest, Reason: ReasonMisdirected}
	case !get:
		return Decision{Action: Refuse, Status: http.StatusMethodNotAllowed, Reason: ReasonMethod}
	case snap == nil:
		return Decision{Action: Refuse, Status: http.StatusServiceUnavailable, Reason: ReasonNoView}
	case snap.Expired(now):
		return Decision{Action: Refuse, Status: http.StatusServiceUnavailable, Reason: ReasonExpiredView}
	}
	q := pickQuery{client: clientOf(req), rnd: rnd, now: now, anyRoom: true, need: req.Need}
	if h, _ := holdingsOf(req); h.Known {
		q.holds = h.Holds
	}
	host, member, ok := snap.pick(q)
	if !ok && q.holds != nil {
		q.holds = nil
		if _, _, someone := snap.pick(q); someone { // members, none with the file
			return Decision{Action: Refuse, Status: http.StatusNotFound, Reason: ReasonNoCopy}
		}
	}
	if !ok {
		return Decision{Action: Refuse, Status: http.StatusServiceUnavailable, Reason: ReasonNoSibling}
	}
	return Decision{Action: Redirect, Target: host, Member: member, Reason: ReasonDispatch}
}

// holdingsOf asks req for its Holdings (none: not Known).
func holdingsOf(req RedirectRequest) (Holdings, bool) {
	if req.Holdings == nil {
		return Holdings{}, true
	}
	return req.Holdings()
}

// rescue decides a request on the group name for a file this mirror
// lacks or holds an older copy of: a redirect to the policy's first
// sibling that holds the best copy, whatever its load (the alternative is
// a 404 or stale bytes), on a view that is not expired; served (a 404, or
// the copy it has) when no sibling in the view holds it. The sibling is
// asked on its own host name, so there is never a second hop. done is
// false when this mirror holds the best copy, or nothing is known: holds
// then says which siblings the correction may send the request to.
func rescue(req RedirectRequest, snap *GroupSnapshot, now time.Time, rnd *rand.Rand) (holds func(string) bool, d Decision, done bool) {
	h, self := holdingsOf(req)
	switch {
	case !h.Known:
		return nil, Decision{}, false
	case self:
		return h.Holds, Decision{}, false
	case snap == nil || snap.Expired(now):
		return nil, Decision{Action: Serve, Reason: ReasonNoCopy}, true
	}
	host, member, ok := snap.pick(pickQuery{client: clientOf(req), rnd: rnd, now: now, holds: h.Holds, anyRoom: true, need: req.Need})
	if !ok {
		return nil, Decision{Action: Serve, Reason: ReasonNoCopy}, true
	}
	return nil, Decision{Action: Redirect, Target: host, Member: member, Reason: ReasonRescue}, true
}

func clientOf(req RedirectRequest) scheduler.Client {
	if req.Client == nil {
		return scheduler.Client{}
	}
	return req.Client()
}

// hostMatches reports whether the Host header h names host: the port
// stripped, case-insensitive, a trailing dot on either side tolerated.
func hostMatches(h, host string) bool {
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	return sameHost(h, host)
}

// RedirectLocation is the Location of a redirect of r to the host target
// with scheme (http or https, see RequestScheme): the target host, the
// port of r's Host header unless it is the default of scheme (members of
// a group listen on the same port; :80 for http and :443 for https are
// left out) or not a port (ValidHostPort: the request check refuses
// those before), or the target's own port when the view gives one, then
// r's path (as escaped) and query unchanged.
func RedirectLocation(r *http.Request, scheme, target string) string {
	host := target
	if _, _, err := net.SplitHostPort(target); err != nil {
		if port, ok := serve.ValidHostPort(r.Host); ok && port != "" &&
			!(scheme == SchemeHTTP && port == "80") && !(scheme == SchemeHTTPS && port == "443") {
			host = net.JoinHostPort(target, port)
		}
	}
	loc := scheme + "://" + host + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		loc += "?" + r.URL.RawQuery
	}
	return loc
}

// LoadSource gives this mirror's load reading; *LoadMeter is one.
type LoadSource interface {
	Read(now time.Time) LoadReading
}

// ViewSource gives the current group snapshot (nil: none yet);
// *ViewWatcher is one.
type ViewSource interface {
	Snapshot() *GroupSnapshot
}

var (
	_ LoadSource   = (*LoadMeter)(nil)
	_ ViewSource   = (*ViewWatcher)(nil)
	_ http.Handler = (*Redirector)(nil)
)

// Files gives the size and modification time of the regular file that an
// escaped request path names; ok is false for a path that is bad, missing
// or not a regular file (serve.FileServer is one).
type Files interface {
	Stat(escapedPath string) (size int64, modTime time.Time, ok bool)
}

// RedirectorOptions configure a Redirector.
type RedirectorOptions struct {
	// Rules are the static rules (required: Group).
	Rules RedirectRules
	// Next serves what is not redirected; nil only for a dispatcher.
	Next http.Handler
	// Load is this mirror's load reading (required unless Rules.Dispatcher).
	Load LoadSource
	// Flows measures this mirror's request rates, the fair-share law's
	// signal; the Redirector notes every request in it (default: a new
	// FlowMeter with DefaultTimeConstant). The load report takes its
	// serving figure from the same meter (probe.ReporterConfig.Serving).
	Flows *FlowMeter
	// View is the group view; nil means none, so nothing is redirected.
	View ViewSource
	// Locator tells where clients are; nil puts everyone at the unknown
	// location.
	Locator *geo.Locator
	// Files, when set, gives file sizes for the min_size rule and what
	// this mirror holds; nil skips the rule (a site front end, whose back
	// ends hold the files).
	Files Files
	// Contents, when set, says which siblings hold a path (their content
	// indexes, see Holdings): redirects go only to those with the best
	// copy, and a request for a file this mirror lacks is rescued. Nil:
	// every member holds every file.
	Contents ContentMap
	// Clock gives the time of a decision (default time.Now).
	Clock func() time.Time
	// Rand is the randomness of the decisions (default: seeded at
	// random). Each request draws from its own generator, seeded from
	// Rand, so Rand is only locked briefly.
	Rand *rand.Rand
	// Logger gets nothing per request; it is kept for the future
	// (default: discard).
	Logger *slog.Logger
	// Registerer, when set, gets transmirror_mirror_redirects_total{reason},
	// transmirror_mirror_sibling_redirects_total{member} and
	// transmirror_mirror_redirects_skipped_total{reason}.
	Registerer prometheus.Registerer
}

// Redirector is the http.Handler of 302 correction: it runs Decide for
// every request and redirects, refuses or hands it to the next handler.
// Every redirect is booked on the snapshot it was decided on
// (GroupSnapshot.Book), so that the next decisions see the sibling's
// load grow, and counted by reason and by target member. Its rules and
// locator can be swapped while it serves (SetRules). It is safe for
// concurrent use.
type Redirector struct {
	o   RedirectorOptions
	cur atomic.Pointer[redirectConfig]

	mu  sync.Mutex // guards rnd
	rnd *rand.Rand

	redirects *prometheus.CounterVec
	targets   *viewCounter // by target member
	skipped   *prometheus.CounterVec
}

// NewRedirector checks o and returns a Redirector, with its metrics
// registered when o.Registerer is set.
func NewRedirector(o RedirectorOptions) (*Redirector, error) {
	switch {
	case o.Rules.Group == "":
		return nil, errors.New("mirror: redirector: no group")
	case o.Next == nil && !o.Rules.Dispatcher:
		return nil, errors.New("mirror: redirector: no next handler")
	case o.Load == nil && !o.Rules.Dispatcher:
		return nil, errors.New("mirror: redirector: no utilization source")
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if o.Flows == nil {
		o.Flows = NewFlowMeter(0)
	}
	rd := &Redirector{
		o:   o,
		rnd: o.Rand,
		redirects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "redirects_total",
			Help: "Requests answered with 302 to a sibling, by reason (overload: this mirror over its watermark; dispatch: a dispatcher).",
		}, []string{"reason"}),
		targets: &viewCounter{view: o.View, vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "sibling_redirects_total",
			Help: "Requests answered with 302, by the member they were sent to (a dispatcher's: every member; a mirror's: its siblings); a member's series comes with the group view that lists it and goes with the first that does not.",
		}, []string{"member"})},
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "redirects_skipped_total",
			Help: "Requests that were to be redirected but were served (or, by a dispatcher, refused), by reason (no_view, stale_view, expired_view, no_sibling).",
		}, []string{"reason"}),
	}
	rd.cur.Store(&redirectConfig{rules: o.Rules, loc: o.Locator})
	if o.Registerer != nil {
		share := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "redirect_share_ratio",
			Help: "The share of the redirectable requests that the 302 correction redirects now.",
		}, func() float64 { return rd.Share(rd.o.Clock()) })
		target := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "redirect_target_utilization_ratio",
			Help: "The utilization the fair-share law steers to: the group's fair utilization, at least the low watermark.",
		}, func() float64 { return rd.Target() })
		for _, c := range []prometheus.Collector{share, target} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("mirror: redirector: register metrics: %w", err)
			}
		}
	}
	for _, r := range []string{ReasonOverload, ReasonDispatch, ReasonRescue} {
		rd.redirects.WithLabelValues(r)
	}
	for _, r := range []string{ReasonNoView, ReasonStaleView, ReasonExpiredView, ReasonNoSibling} {
		rd.skipped.WithLabelValues(r)
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{rd.redirects, rd.targets, rd.skipped} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("mirror: redirector: register metrics: %w", err)
			}
		}
	}
	return rd, nil
}

// redirectConfig is what SetRules swaps: one immutable value, so that a
// request sees the rules and the locator of one configuration.
type redirectConfig struct {
	rules RedirectRules
	loc   *geo.Locator
}

// SetRules makes rules and loc (nil: the unknown location for everyone)
// the redirect rules and the client locator from the next request on.
// rules.Group and rules.Dispatcher keep the values NewRedirector was
// given: they decide how the mirror was built, and need a restart.
func (rd *Redirector) SetRules(rules RedirectRules, loc *geo.Locator) {
	rules.Group, rules.Dispatcher = rd.o.Rules.Group, rd.o.Rules.Dispatcher
	rd.cur.Store(&redirectConfig{rules: rules, loc: loc})
}

// Rules returns the rules in use.
func (rd *Redirector) Rules() RedirectRules { return rd.cur.Load().rules }

// ServeHTTP decides and acts.
func (rd *Redirector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cur := rd.cur.Load()
	rules := &cur.rules
	if isMirrorList(r) {
		rd.mirrorList(w, r, cur)
		return
	}
	if !rules.Dispatcher && !hostMatches(r.Host, rules.Group) {
		rd.o.Flows.Note(rd.o.Clock(), false, false)
		rd.o.Next.ServeHTTP(w, r) // the common case, without a draw
		return
	}
	now := rd.o.Clock()
	var snap *GroupSnapshot
	if rd.o.View != nil {
		snap = rd.o.View.Snapshot()
	}
	redirectable := false
	share := func() Share {
		redirectable = true
		return rd.share(rules, snap, now)
	}
	fw := ForwardedOf(r, rules.TrustedProxies)
	scheme := RequestScheme(rules.Scheme, r.TLS != nil, fw.Proto)
	rnd := rd.draw()
	d := Decide(*rules, RedirectRequest{
		Method:   r.Method,
		Host:     r.Host,
		Path:     r.URL.Path,
		Size:     rd.sizeFunc(r),
		Client:   func() scheduler.Client { return locateClient(fw.Client, cur.loc) },
		Need:     api.NeedOf(scheme, fw.Client),
		Holdings: rd.holdingsFunc(r, rules),
	}, share, snap, now, rnd)
	if d.Action == Redirect {
		snap.Book(d.Member, now)
	}
	rd.o.Flows.Note(now, redirectable, d.Action != Serve)
	rd.act(w, r, d, scheme)
}

// draw is a generator of one request's own, seeded from Rand.
func (rd *Redirector) draw() *rand.Rand {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	return rand.New(rand.NewPCG(rd.rnd.Uint64(), rd.rnd.Uint64()))
}

// share is what rules' law decides at now for the redirectable requests,
// with snap the group view (nil: none): the share to redirect and, under
// the fair-share law, the limit on the siblings (SiblingLimit) and whether
// this mirror is measurably over its target (Overloaded).
func (rd *Redirector) share(rules *RedirectRules, snap *GroupSnapshot, now time.Time) Share {
	if rules.Dispatcher {
		return Share{P: 1}
	}
	r := rules.WithWatermarks(snap)
	rules = &r
	rdg := rd.o.Load.Read(now)
	if rules.Law == LawWatermark {
		return Share{P: RedirectShare(*rules, rdg.Utilization)}
	}
	fair := math.NaN()
	if snap != nil {
		fair = snap.FairUtilization()
	}
	c := Correction{
		Flows: rd.o.Flows.Flows(now), RunQueue: rdg.RunQueue, Capacity: rdg.Capacity,
		Fair: fair, Bandwidth: rdg.Bandwidth, TimeConstant: rd.o.Flows.TimeConstant(),
	}
	return Share{P: FairShareRedirect(*rules, c), Limit: SiblingLimit(*rules, c), Over: Overloaded(*rules, c)}
}

// Share returns the share of the redirectable requests that the
// Redirector would redirect at now (0 with redirects off).
func (rd *Redirector) Share(now time.Time) float64 {
	rules := &rd.cur.Load().rules
	if !rules.Dispatcher && !rules.Enabled {
		return 0
	}
	var snap *GroupSnapshot
	if rd.o.View != nil {
		snap = rd.o.View.Snapshot()
	}
	return rd.share(rules, snap, now).P
}

// Target returns the utilization the fair-share law steers to now
// (Target of the current view's fair utilization); under the watermark
// law, the low watermark.
func (rd *Redirector) Target() float64 {
	rules := rd.cur.Load().rules
	fair := math.NaN()
	var snap *GroupSnapshot
	if rd.o.View != nil {
		snap = rd.o.View.Snapshot()
	}
	if snap != nil && rules.Law != LawWatermark {
		fair = snap.FairUtilization()
	}
	return Target(rules.WithWatermarks(snap), fair)
}

// Watermarks returns the low and high watermark the rules in use work
// with now (RedirectRules.WithWatermarks of the current view).
func (rd *Redirector) Watermarks() (low, high float64) {
	var snap *GroupSnapshot
	if rd.o.View != nil {
		snap = rd.o.View.Snapshot()
	}
	r := rd.cur.Load().rules.WithWatermarks(snap)
	return r.LowWatermark, r.HighWatermark
}

// Flows returns the Redirector's flow meter.
func (rd *Redirector) Flows() *FlowMeter { return rd.o.Flows }

// viewCounter is a counter by member whose series follow the group view:
// at each collection, when the view is a new one, its candidates get
// their series (at 0) and the members it no longer lists lose theirs, so
// the label values are bounded by the group's membership.
type viewCounter struct {
	vec  *prometheus.CounterVec // one label, member
	view ViewSource             // nil: no view, so no series
	seen atomic.Pointer[GroupSnapshot]
}

var _ prometheus.Collector = (*viewCounter)(nil)

// Describe implements prometheus.Collector.
func (c *viewCounter) Describe(ch chan<- *prometheus.Desc) { c.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (c *viewCounter) Collect(ch chan<- prometheus.Metric) {
	if c.view != nil {
		c.sync(c.view.Snapshot())
	}
	c.vec.Collect(ch)
}

// sync brings the series in step with snap, once per snapshot.
func (c *viewCounter) sync(snap *GroupSnapshot) {
	prev := c.seen.Load()
	if snap == nil || snap == prev || !c.seen.CompareAndSwap(prev, snap) {
		return
	}
	for _, name := range snap.names {
		c.vec.WithLabelValues(name)
	}
	listed := make(map[string]bool, len(snap.View.Members))
	for _, m := range snap.View.Members {
		listed[m.Name] = true
	}
	var gone []string
	probe.EachSample(c.vec, func(l map[string]string, _ float64) {
		if m := l["member"]; !listed[m] {
			gone = append(gone, m)
		}
	})
	for _, m := range gone {
		c.vec.DeleteLabelValues(m)
	}
}

// act carries out d, a redirect with scheme.
func (rd *Redirector) act(w http.ResponseWriter, r *http.Request, d Decision, scheme string) {
	switch d.Reason {
	case ReasonNoView, ReasonStaleView, ReasonExpiredView, ReasonNoSibling:
		rd.skipped.WithLabelValues(d.Reason).Inc()
	}
	switch d.Action {
	case Redirect:
		rd.redirects.WithLabelValues(d.Reason).Inc()
		rd.targets.vec.WithLabelValues(d.Member).Inc()
		h := w.Header()
		h.Set("Location", RedirectLocation(r, scheme, d.Target))
		h.Set("Cache-Control", "no-store")
		serve.WriteStatus(w, r, http.StatusFound)
	case Refuse:
		w.Header().Set("Cache-Control", "no-store")
		if d.Status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "GET, HEAD")
		}
		if d.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		serve.WriteStatus(w, r, d.Status)
	default:
		rd.o.Next.ServeHTTP(w, r)
	}
}

// locateClient locates the client's address src (ForwardedOf) with loc
// (no ECS over HTTP); a nil loc or the zero src puts it at the unknown
// location.
func locateClient(src netip.Addr, loc *geo.Locator) scheduler.Client {
	p := geo.ClientPrefix(src, netip.Prefix{}, false)
	c := scheduler.Client{Key: scheduler.ScopeKey(p)}
	if loc != nil {
		c.Loc = loc.Locate(p).Loc
	}
	return c
}

// sizeFunc returns the size lookup for r, nil without Files.
func (rd *Redirector) sizeFunc(r *http.Request) func() (int64, bool) {
	fs := rd.o.Files
	if fs == nil {
		return nil
	}
	return func() (int64, bool) {
		size, _, _ := fs.Stat(r.URL.EscapedPath())
		return size, true
	}
}

// Counts returns the requests redirected and those skipped (served) since
// the start, by reason (the status page's figures).
func (rd *Redirector) Counts() (redirected, skipped map[string]uint64) {
	return countsByLabel(rd.redirects, "reason"), countsByLabel(rd.skipped, "reason")
}

// countsByLabel sums the samples of c by the value of label.
func countsByLabel(c prometheus.Collector, label string) map[string]uint64 {
	out := make(map[string]uint64)
	probe.EachSample(c, func(l map[string]string, v float64) { out[l[label]] += uint64(v) })
	return out
}
