package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler"
)

// MaxViewSize is the largest group view body, in bytes, that a
// ViewWatcher reads; a view of a hundred members is about 100 KiB.
const MaxViewSize = api.MaxViewBytes

// StaleViews is how many refresh intervals a group view stays usable:
// older, it is stale and no request is redirected on its word.
const StaleViews = 3

// ExpiredViews is how many refresh intervals a dispatcher, which has no
// content to fall back on, keeps redirecting on a stale view: older, the
// view has expired and the dispatcher answers 503 with Retry-After
// rather than send clients where a view that old says (members drained
// or gone since). With the default 5 s interval: stale after 15 s,
// expired after 100 s.
const ExpiredViews = 20

// Why the group view could not be read: the values of the reason label
// of transmirror_mirror_view_errors_total and of ViewHealth.Reason.
const (
	// ViewErrTooLarge: the body is larger than MaxViewSize.
	ViewErrTooLarge = "too_large"
	// ViewErrMalformed: the body is not the JSON of a group view.
	ViewErrMalformed = "malformed"
	// ViewErrInvalid: the view parses but can not be used: another
	// group's, or a policy or watermarks the scheduler refuses.
	ViewErrInvalid = "invalid"
	// ViewErrRefused: dnsd answered with a status other than 2xx.
	ViewErrRefused = "refused"
	// ViewErrUnreachable: no answer (connection refused, timeout, reset).
	ViewErrUnreachable = "unreachable"
)

// ViewErrorReasons returns the bounded set of ViewErr reasons, for
// pre-declaring the metric's label values.
func ViewErrorReasons() []string {
	return []string{ViewErrTooLarge, ViewErrMalformed, ViewErrInvalid, ViewErrRefused, ViewErrUnreachable}
}

// Results of a view refresh, the values of the result label of
// transmirror_mirror_view_refreshes_total.
const (
	viewOK        = "ok"
	viewHTTPError = "http_error" // a status other than 200
	viewInvalid   = "invalid"    // too large, not JSON, wrong group, unknown policy
	viewNetwork   = "network"
)

// Why a member of the view is not a redirect candidate though it is up or
// unknown and not this mirror: the values of the reason label of
// transmirror_mirror_view_dropped_candidates.
const (
	// DropGroupName: its host is the group name itself (a trailing dot,
	// case and a port aside). A redirect there comes back to the group:
	// the client loops until its redirect limit.
	DropGroupName = "group_name"
	// DropBadHost: its host is not a host name that can go into a
	// Location header.
	DropBadHost = "bad_host"
	// DropBadFigures: its load, capacity or bandwidth are not numbers.
	DropBadFigures = "bad_figures"
)

// DropReasons returns the bounded set of the reasons a candidate is
// dropped, for pre-declaring the metric's label values.
func DropReasons() []string { return []string{DropGroupName, DropBadHost, DropBadFigures} }

// RedirectBooking is what one redirect books on the sibling it sends the
// client to, until the next group view shows that sibling's load with the
// request in it.
type RedirectBooking struct {
	// Load is the load one redirect adds to the sibling, in load units
	// (10·r). A sibling's r is its request count over its report window
	// W divided by W, so one more request raises r by 1/W for W seconds
	// and its load by 10/W.
	Load float64
	// HalfLife is how fast a booking decays, so that a view that does not
	// come (dnsd unreachable, a dispatcher redirecting on a stale view)
	// can not keep a sibling out forever.
	HalfLife time.Duration
	// TimeConstant is the time constant of the siblings' serving_load
	// (their FlowMeter's; this mirror's own redirect.time_constant, as the
	// siblings' is not in the view), that of the Sent meter when the
	// snapshot makes its own (default DefaultTimeConstant).
	TimeConstant time.Duration
	// Sent, shared by the snapshots of one mirror, measures the redirects
	// sent to each sibling (see SentMeter); nil: each snapshot has its
	// own, which then counts the redirects since the view only.
	Sent *SentMeter
}

// BookingFor returns the booking of a redirect to siblings whose load
// reports take their rates over window (probe.DefaultReportWindow when
// window ≤ 0): a load of LoadPerRequestRate / W, decaying with a half-life
// of W·ln 2. That is a mean life of W, the time the request stays in the
// sibling's sliding window: the decayed booking and the request's share of
// the sibling's reported load have the same integral, and under a steady
// stream of R redirects per second with no new view the bookings converge
// to 10·R, what the sibling's report will show. The window is this mirror's
// own load_window: the siblings' is not in the view, and a group's mirrors
// normally share one. The time constant of the siblings' serving load is
// DefaultTimeConstant.
func BookingFor(window time.Duration) RedirectBooking {
	if window <= 0 {
		window = probe.DefaultReportWindow
	}
	return RedirectBooking{
		Load:         scheduler.LoadPerRequestRate / window.Seconds(),
		HalfLife:     time.Duration(float64(window) * math.Ln2),
		TimeConstant: DefaultTimeConstant,
	}
}

// MirrorBooking is BookingFor(window) with the time constant tau of the
// siblings' serving load and a SentMeter of it, for the snapshots of one
// mirror.
func MirrorBooking(window, tau time.Duration) RedirectBooking {
	b := BookingFor(window)
	b.TimeConstant = tau
	b.Sent = NewSentMeter(tau)
	return b
}

// withDefaults fills a zero Load or HalfLife from BookingFor's defaults.
func (b RedirectBooking) withDefaults() RedirectBooking {
	d := BookingFor(0)
	if !(b.Load > 0) || math.IsInf(b.Load, 0) {
		b.Load = d.Load
	}
	if b.HalfLife <= 0 {
		b.HalfLife = d.HalfLife
	}
	if b.TimeConstant <= 0 {
		b.TimeConstant = DefaultTimeConstant
	}
	return b
}

// GroupSnapshot is a picture of the group for the redirect decision, built
// once per refreshed view (never per request): the view with the time it
// was fetched, the candidate siblings as a scheduler group under the
// group's own policy, and the redirects booked on them since. Candidates
// are the members that are up or unknown, have a valid host name that is
// not the group name, and are not this mirror.
//
// The view is immutable; the bookings are its one mutable part, a
// scheduler.Estimator that the policy reads as pending load (Query.Load),
// the way dnsd's answers book their hidden load. Without them every
// redirect between two views would see the same loads and least-load
// would send them all to one sibling. A new view starts with no bookings:
// its loads include the redirects booked on the old one (with the lag of
// the siblings' next reports, as in dnsd when a report resets the pending
// load). The bookings count the redirects that arrive at a sibling, not
// the earlier ones that leave its report window meanwhile, so under a
// steady stream of redirects they overstate its load by up to the view
// interval's share of the window: an error toward spreading.
type GroupSnapshot struct {
	// View is the group view as dnsd sent it.
	View api.GroupView
	// Fetched is when the view was received.
	Fetched time.Time
	// StaleAfter is how long after Fetched the view is stale.
	StaleAfter time.Duration
	// ExpireAfter is how long after Fetched the view has expired, even
	// for a dispatcher: StaleAfter·ExpiredViews/StaleViews.
	ExpireAfter time.Duration

	policy  scheduler.Policy
	group   *scheduler.Group
	hosts   []string            // host name of each candidate, by group index
	names   []string            // member name of each candidate, by group index
	index   map[string]int      // group index of each candidate, by member name
	figs    []scheduler.Figures // each candidate's figures from the view
	serving []float64           // each candidate's serving load from the view
	sentAt  []float64           // the rate of redirects sent to each candidate when the view came
	high    float64             // the policy's high watermark
	fair    float64             // the group's fair utilization u*; NaN: unknown
	booking RedirectBooking
	booked  *scheduler.Estimator // the redirects booked on the candidates
	dropped map[string][]string  // the members left out, by Drop reason
	offers  []api.Offers         // what each candidate serves, by group index
}

// NewGroupSnapshot builds the snapshot of view for the member self
// (excluded from the candidates; "" for a dispatcher, which is no member),
// fetched at fetched and stale after staleAfter, booking each redirect as
// booking says (its zero fields: BookingFor's defaults). It fails for a
// policy or watermarks that the scheduler refuses.
//
// A candidate's load is its reported load plus the pending load of dnsd's
// recent answers, its bytes per second the reported ones, and its
// capacity and bandwidth the view's, all as the view carries them: the
// scheduler sees the figures dnsd's policy sees, and a sibling whose
// uplink is full is as full as one over its capacity. A view of an older
// dnsd, without bytes per second or bandwidth, has no bandwidth limits. A
// member whose figures are not numbers (negative, NaN, infinite) is left
// out, one without a positive capacity is never below the high watermark. Its
// weight is the view's weight, or 1 when the view shows none (weight is
// omitted from the JSON when zero, so a zero can not be told from an
// absent one). A member whose host is the group name (view.Name) is left
// out whatever dnsd says: a redirect to it is a redirect to the group,
// which loops. Dropped lists the members left out and why.
func NewGroupSnapshot(view api.GroupView, self string, fetched time.Time, staleAfter time.Duration, booking RedirectBooking) (*GroupSnapshot, error) {
	p := scheduler.Params{LowWatermark: view.Watermarks.Low, HighWatermark: view.Watermarks.High}
	policy, err := scheduler.New(view.Policy, p)
	if err != nil {
		return nil, fmt.Errorf("mirror: group view: %w", err)
	}
	_, high := viewWatermarks(view)
	booking = booking.withDefaults()
	if booking.Sent == nil {
		booking.Sent = NewSentMeter(booking.TimeConstant)
	}
	s := &GroupSnapshot{
		View: view, Fetched: fetched, StaleAfter: staleAfter, ExpireAfter: staleAfter * ExpiredViews / StaleViews,
		policy: policy, high: high,
		index: make(map[string]int), booking: booking, booked: scheduler.NewEstimator(booking.HalfLife),
		fair: fairUtilization(view.Members), dropped: make(map[string][]string),
	}
	var members []scheduler.Member
	for _, m := range view.Members {
		if m.Name == self || (m.State != "up" && m.State != "unknown") {
			continue
		}
		host := strings.TrimSuffix(m.Host, ".")
		fig := scheduler.Figures{
			Load: m.Load, Pending: m.Pending, Capacity: m.Capacity,
			BytesPerSecond: m.BytesPerSecond, Bandwidth: m.Bandwidth,
		}
		if why := dropReason(host, view.Name, fig); why != "" {
			s.dropped[why] = append(s.dropped[why], m.Name)
			continue
		}
		w := m.Weight
		if !(w > 0) {
			w = 1
		}
		members = append(members, scheduler.Member{
			Name: m.Name, Up: true, Load: fig.Load + fig.Pending, Capacity: fig.Capacity,
			BytesPerSecond: fig.BytesPerSecond, Bandwidth: fig.Bandwidth,
			Weight: w, Loc: locationOf(m.Location),
		})
		s.index[m.Name] = len(s.hosts)
		s.hosts = append(s.hosts, host)
		s.names = append(s.names, m.Name)
		s.figs = append(s.figs, fig)
		s.serving = append(s.serving, servingLoad(m))
		s.sentAt = append(s.sentAt, booking.Sent.Rate(m.Name, fetched))
		s.offers = append(s.offers, api.OffersOf(m))
	}
	s.group = scheduler.NewGroup(members)
	booking.Sent.Retain(func(name string) bool { _, ok := s.index[name]; return ok })
	return s, nil
}

// servedLoad is the load of what member m serves over its report window:
// its reported load less 10 per redirect per second (a 302 costs next to
// nothing; the request is served, and counted, where it lands).
func servedLoad(m api.MemberView) float64 {
	if m.LastReport == nil {
		return m.Load
	}
	return max(m.Load-probe.LoadOf(m.LastReport.RedirectsPerSecond, 0), 0)
}

// servingLoad is the load member m serves now: the fast serving_load of
// its last report, or its served load when the report has none.
func servingLoad(m api.MemberView) float64 {
	if r := m.LastReport; r != nil && r.ServingLoad > 0 && !math.IsInf(r.ServingLoad, 0) {
		return r.ServingLoad
	}
	return servedLoad(m)
}

// fairUtilization is the group's fair utilization u*: the load that the
// members that are up or unknown serve over the report window, over their
// capacity, both summed (a member whose figures are not numbers counts in
// neither). The sum does not depend on who serves whom: every request is
// served once, where it lands, so it moves only with the group's offered
// load, and the report window's slowness costs nothing. NaN without a
// member with capacity.
func fairUtilization(members []api.MemberView) float64 {
	var load, capacity float64
	for _, m := range members {
		if m.State != "up" && m.State != "unknown" {
			continue
		}
		l := servedLoad(m)
		if !(l >= 0) || math.IsInf(l, 0) || !(m.Capacity > 0) || math.IsInf(m.Capacity, 0) {
			continue
		}
		load += l
		capacity += m.Capacity
	}
	if !(capacity > 0) {
		return math.NaN()
	}
	return load / capacity
}

// FairUtilization returns the group's fair utilization u*, what every
// member would be at if each served its capacity share of what the group
// serves: Σ served load / Σ capacity over the members that are up or
// unknown, this mirror included (NaN without one with capacity).
func (s *GroupSnapshot) FairUtilization() float64 { return s.fair }

// figures reports whether f holds numbers the scheduler can compare: the
// load, pending load and bytes per second finite and non-negative, the
// capacity and the bandwidth finite (a capacity of 0 or less is full, a
// bandwidth of 0 or less no limit).
func figures(f scheduler.Figures) bool {
	for _, x := range []float64{f.Load, f.Pending, f.Load + f.Pending, f.BytesPerSecond} {
		if !(x >= 0) || math.IsInf(x, 0) {
			return false
		}
	}
	for _, x := range []float64{f.Capacity, f.Bandwidth} {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// dropReason is why a candidate with host and figures fig is no redirect
// target in the view of group, "" when it is one.
func dropReason(host, group string, fig scheduler.Figures) string {
	switch {
	case !validTargetHost(host):
		return DropBadHost
	case hostMatches(host, group):
		return DropGroupName
	case !figures(fig):
		return DropBadFigures // not figures: a member to stay away from
	}
	return ""
}

// Dropped returns the names of the members that are up or unknown and
// not this mirror but are no candidate, by reason (DropGroupName …),
// in the view's order. The caller must not change them.
func (s *GroupSnapshot) Dropped() map[string][]string { return s.dropped }

// validTargetHost accepts a host name, or a host name with a port, that is
// safe to put into a Location header.
func validTargetHost(h string) bool {
	if host, port, err := net.SplitHostPort(h); err == nil {
		_, perr := strconv.ParseUint(port, 10, 16)
		return ValidHostName(host) && perr == nil
	}
	return ValidHostName(h)
}

// locationOf converts a view's location to the scheduler's.
func locationOf(l api.LocationView) scheduler.Location {
	s := scheduler.Location{Country: l.Country, Continent: l.Continent}
	if l.Lat != nil && l.Lon != nil {
		s.Lat, s.Lon, s.HasCoords = *l.Lat, *l.Lon, true
	}
	return s
}

// Stale reports whether the view is too old to act on at now.
func (s *GroupSnapshot) Stale(now time.Time) bool { return now.Sub(s.Fetched) > s.StaleAfter }

// Expired reports whether the view is too old even for a dispatcher to
// act on at now (older than ExpireAfter).
func (s *GroupSnapshot) Expired(now time.Time) bool { return now.Sub(s.Fetched) > s.ExpireAfter }

// Candidates returns the number of siblings a redirect may go to.
func (s *GroupSnapshot) Candidates() int { return s.group.Len() }

// Pick returns the host and member name of the best candidate for
// client, chosen by the group's policy with rnd, that is below the
// policy's high watermark, both counting the redirects booked until now.
// When none is and anyRoom is false it returns ok false; with anyRoom (a
// dispatcher, which has nothing else to offer) it returns the policy's
// first choice regardless. ok is false when there is no candidate at all.
// Pick books nothing: the caller books the redirect it makes (Book).
func (s *GroupSnapshot) Pick(client scheduler.Client, rnd *rand.Rand, now time.Time, anyRoom bool) (host, member string, ok bool) {
	return s.pick(pickQuery{client: client, rnd: rnd, now: now, anyRoom: anyRoom})
}

// PickBelow returns the host and member name of the best candidate for
// client, in the order of the group's policy with rnd (counting the
// redirects booked until now), whose serving utilization (Serving) is
// below limit: under the fair-share law, SiblingLimit, so that a redirect
// goes only where it does not take the receiver over its own fair share
// or over what the redirecting mirror serves. ok is false when no
// candidate is below the limit.
func (s *GroupSnapshot) PickBelow(limit float64, client scheduler.Client, rnd *rand.Rand, now time.Time) (host, member string, ok bool) {
	return s.pick(pickQuery{client: client, rnd: rnd, now: now, serving: true, limit: limit})
}

// PickWithin is PickBelow with each candidate's serving figure allowed to
// read up to its noise over limit (servingNoise: one standard deviation):
// for a mirror that is measurably over its target (Overloaded) when no
// candidate reads below the limit itself. ok is false when none is
// within.
func (s *GroupSnapshot) PickWithin(limit float64, client scheduler.Client, rnd *rand.Rand, now time.Time) (host, member string, ok bool) {
	return s.pick(pickQuery{client: client, rnd: rnd, now: now, serving: true, noisy: true, limit: limit})
}

// pickQuery is one pick: by the group's policy for client, the first
// candidate that holds the request's file (holds; nil: any) and has room:
// a serving utilization below limit (serving; with noise, within its
// noise of it), or else a utilization below the high watermark; with
// anyRoom, the first holder when none has room.
type pickQuery struct {
	client         scheduler.Client
	rnd            *rand.Rand
	now            time.Time
	holds          func(member string) bool
	need           api.Offers // what the candidate must serve (api.NeedOf)
	serving, noisy bool
	limit          float64
	anyRoom        bool
}

func (s *GroupSnapshot) pick(q pickQuery) (host, member string, ok bool) {
	n := s.group.Len()
	if n == 0 {
		return "", "", false
	}
	var buf [16]int
	picked, _ := s.policy.Pick(s.group, scheduler.Query{Client: q.client, N: n, Rand: q.rnd, Now: q.now, Load: s.booked}, buf[:0])
	first := -1
	for _, i := range picked {
		if !s.offers[i].Has(q.need) || (q.holds != nil && !q.holds(s.names[i])) {
			continue
		}
		if first < 0 {
			first = i
		}
		if s.roomFor(q, i) {
			return s.hosts[i], s.names[i], true
		}
	}
	if q.anyRoom && first >= 0 {
		return s.hosts[first], s.names[first], true
	}
	return "", "", false
}

// roomFor reports whether candidate i has room under q.
func (s *GroupSnapshot) roomFor(q pickQuery, i int) bool {
	if !q.serving {
		return s.utilization(i, q.now) < s.high
	}
	u := s.Serving(i, q.now)
	if q.noisy {
		u -= s.servingNoise(i)
	}
	return u < q.limit
}

// servingNoise is the standard deviation of candidate i's serving
// utilization as the view shows it: its serving_load is a rate of Poisson
// arrivals r measured with time constant τ, whose noise is √(r/2τ)
// requests per second, 10 load units each, over its capacity.
func (s *GroupSnapshot) servingNoise(i int) float64 {
	c := s.figs[i].Capacity
	r := max(s.serving[i], 0) / 10
	if !(c > 0) || !(r > 0) {
		return 0
	}
	return 10 * math.Sqrt(r/(2*s.booking.TimeConstant.Seconds())) / c
}

// Serving returns candidate i's serving utilization at now: its serving
// load from the view, changed by as much as the rate of redirects this
// mirror sends it changed since (10 load units per redirect per second,
// see SentMeter), over its capacity, or its bandwidth utilization when
// that is larger (+Inf without a capacity).
func (s *GroupSnapshot) Serving(i int, now time.Time) float64 {
	f := s.figs[i]
	if !(f.Capacity > 0) {
		return math.Inf(1)
	}
	delta := s.booking.Sent.Rate(s.names[i], now) - s.sentAt[i]
	u := max(s.serving[i]+probe.LoadOf(delta, 0), 0) / f.Capacity
	if f.Bandwidth > 0 {
		u = max(u, f.BytesPerSecond/f.Bandwidth)
	}
	return u
}

// utilization is candidate i's utilization at now: its figures from the
// view with the booked load added to the pending load.
func (s *GroupSnapshot) utilization(i int, now time.Time) float64 {
	f := s.figs[i]
	f.Pending += s.booked.Pending(i, now)
	return f.Utilization()
}

// Book records one redirect to the candidate member at now: its booked
// load grows by the booking's Load (decaying from now on), so the picks
// that follow see it until the next view. A member that is not a
// candidate is ignored. Book is safe for concurrent use.
func (s *GroupSnapshot) Book(member string, now time.Time) {
	i, ok := s.index[member]
	if !ok {
		return
	}
	idx := [1]int{i}
	s.booked.Add(idx[:], s.booking.Load, now)
	s.booking.Sent.Note(member, now)
}

// Booked returns the load booked on the candidate member at now, in load
// units, decayed; 0 for a member that is not a candidate.
func (s *GroupSnapshot) Booked(member string, now time.Time) float64 {
	i, ok := s.index[member]
	if !ok {
		return 0
	}
	return s.booked.Pending(i, now)
}

// Booking returns how the snapshot books a redirect.
func (s *GroupSnapshot) Booking() RedirectBooking { return s.booking }

// ViewWatcherOptions configure a ViewWatcher.
type ViewWatcherOptions struct {
	// URLs are the admin base URLs of dnsd (at least one); the view is
	// their api.GetGroup route, taken from whichever answers.
	URLs []string
	// Group is the group's name (required).
	Group string
	// Self is this mirror's member name, left out of the candidates; ""
	// for a dispatcher.
	Self string
	// Interval is the time between refreshes (default DefaultViewInterval).
	// A view is stale StaleViews intervals after it was fetched.
	Interval time.Duration
	// Timeout bounds one attempt at one URL (default the smaller of
	// Interval and DefaultPushTimeout).
	Timeout time.Duration
	// Client fetches the view (default: api.Client's, which follows no
	// redirect).
	Client *http.Client
	// Clock gives the time a view is fetched (default time.Now).
	Clock func() time.Time
	// Booking is how each snapshot books the redirects made on it (zero
	// fields: BookingFor's defaults); see NewGroupSnapshot.
	Booking RedirectBooking
	// Logger gets failures, once per failing spell of each URL (default:
	// discard).
	Logger *slog.Logger
	// Registerer, when set, gets transmirror_mirror_view_refreshes_total
	// {dnsd,result} (dnsd is the URL's index in URLs) and
	// transmirror_mirror_view_last_success_timestamp_seconds,
	// transmirror_mirror_view_errors_total{reason},
	// transmirror_mirror_view_ok, transmirror_mirror_view_age_seconds and
	// transmirror_mirror_view_dropped_candidates{reason}.
	Registerer prometheus.Registerer
}

// ViewWatcher keeps the group view fresh (GROUP-QUERY): it fetches it from
// dnsd every interval and keeps the last good one, with the time it was
// fetched, as a GroupSnapshot. With several dnsd URLs it asks the one that
// answered last, and when that fails the next ones in turn, until one
// gives a good view. A refresh that fails everywhere keeps the old
// snapshot, which goes stale on its own. A refresh that fails everywhere
// after one that worked (or as the first) is logged at warn with its
// reason, and so is the first good one after it: once per spell of an
// unreadable view, however many refreshes fail (Health tells the state).
// Snapshot and Health are safe for concurrent use.
type ViewWatcher struct {
	o       ViewWatcherOptions
	sources []*viewSource
	log     *slog.Logger
	cur     atomic.Pointer[GroupSnapshot]

	refreshes *prometheus.CounterVec
	lastOK    prometheus.Gauge
	dropped   *prometheus.GaugeVec // by Drop reason, of the current view
	errs      *prometheus.CounterVec
	health    atomic.Pointer[ViewHealth]
	mu        sync.Mutex // one refresh at a time; guards next and the spells
	next      int        // the source asked first
}

// viewSource is one dnsd that the view is taken from.
type viewSource struct {
	label  string // the URL's index, the dnsd label
	api    *api.Client
	target string // the view's URL, for logs
	spell  spell
}

// NewViewWatcher checks o and returns a ViewWatcher without a view yet.
func NewViewWatcher(o ViewWatcherOptions) (*ViewWatcher, error) {
	switch {
	case o.Group == "":
		return nil, errors.New("mirror: view: group is required")
	case len(o.URLs) == 0:
		return nil, errors.New("mirror: view: a dnsd URL is required")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultViewInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = min(o.Interval, DefaultPushTimeout)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	w := &ViewWatcher{o: o, log: o.Logger}
	w.health.Store(&ViewHealth{})
	collectors := w.newMetrics()
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	for i, u := range o.URLs {
		c, err := api.NewClient(u, api.ClientOptions{HTTP: o.Client, Clock: o.Clock, MaxResponse: MaxViewSize})
		if err != nil {
			return nil, fmt.Errorf("mirror: view: %w", err)
		}
		src := &viewSource{label: strconv.Itoa(i), api: c, target: c.URL(api.GetGroup, o.Group)}
		src.spell = spell{log: w.log, what: "group view refresh", target: src.target}
		w.sources = append(w.sources, src)
		for _, r := range []string{viewOK, viewHTTPError, viewInvalid, viewNetwork} {
			w.refreshes.WithLabelValues(src.label, r)
		}
	}
	if o.Registerer != nil {
		for _, c := range collectors {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("mirror: view: register metrics: %w", err)
			}
		}
	}
	return w, nil
}

// newMetrics makes the watcher's metrics, with every bounded label value
// present from the start, and returns them for registering.
func (w *ViewWatcher) newMetrics() []prometheus.Collector {
	w.refreshes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "mirror", Name: "view_refreshes_total",
		Help: "Group view requests to dnsd, by dnsd (the index of its URL) and result (ok, http_error, invalid, network).",
	}, []string{"dnsd", "result"})
	w.lastOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "mirror", Name: "view_last_success_timestamp_seconds",
		Help: "When the group view was last refreshed, in seconds since the epoch (0: never).",
	})
	w.dropped = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "mirror", Name: "view_dropped_candidates",
		Help: "Members of the current group view that are up or unknown but no redirect target, by reason (group_name: the host is the group name, which would loop; bad_host; bad_figures).",
	}, []string{"reason"})
	for _, r := range DropReasons() {
		w.dropped.WithLabelValues(r)
	}
	w.errs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "mirror", Name: "view_errors_total",
		Help: "Group view requests to dnsd that gave no usable view, by reason (too_large, malformed, invalid, refused, unreachable).",
	}, []string{"reason"})
	for _, r := range ViewErrorReasons() {
		w.errs.WithLabelValues(r)
	}
	viewOKGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "mirror", Name: "view_ok",
		Help: "1 when the last refresh of the group view gave a good view, 0 when it failed or none was tried yet.",
	}, func() float64 {
		if w.Health().OK {
			return 1
		}
		return 0
	})
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "mirror", Name: "view_age_seconds",
		Help: "The age of the group view in use (+Inf: none yet); redirects stop past 3 refresh intervals, a dispatcher's past 20.",
	}, func() float64 {
		snap := w.Snapshot()
		if snap == nil {
			return math.Inf(1)
		}
		return max(w.o.Clock().Sub(snap.Fetched).Seconds(), 0)
	})
	return []prometheus.Collector{w.refreshes, w.lastOK, w.dropped, w.errs, viewOKGauge, age}
}

// Snapshot returns the last good view, or nil when there has been none.
func (w *ViewWatcher) Snapshot() *GroupSnapshot { return w.cur.Load() }

// ViewHealth is whether the group view can be read, as of the last
// refresh.
type ViewHealth struct {
	// OK is true when the last refresh gave a good view.
	OK bool
	// Reason is why the last refresh failed (one of ViewErrorReasons(),
	// that of the last dnsd asked); "" when OK or before any refresh.
	Reason string
	// Since is when the view became unreadable: the first failed
	// refresh of the current spell; zero when OK.
	Since time.Time
	// Failures is the number of refreshes failed in a row.
	Failures int
}

// Health returns whether the group view can be read.
func (w *ViewWatcher) Health() ViewHealth { return *w.health.Load() }

// Run refreshes at once and then every interval until ctx is done; it
// returns nil then. Failures do not stop it.
func (w *ViewWatcher) Run(ctx context.Context) error {
	every(ctx, w.o.Interval, func(ctx context.Context) { _ = w.Refresh(ctx) }) // counted and logged by Refresh
	return nil
}

// Refresh fetches the view now and swaps it in when it is good: from the
// dnsd that answered last, else from the next ones in turn, each attempt
// bounded by the timeout. It returns nil once one gave a good view, else
// every attempt's error. Each attempt is counted and a change between
// failing and working is logged, by URL.
func (w *ViewWatcher) Refresh(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	reason := ""
	for k := range w.sources {
		i := (w.next + k) % len(w.sources)
		src := w.sources[i]
		result, why, err := w.refresh(ctx, src)
		w.refreshes.WithLabelValues(src.label, result).Inc()
		src.spell.note(ctx, result, err)
		if err == nil {
			if i != w.next {
				w.log.Info("group view now from another dnsd", "url", src.target)
				w.next = i
			}
			w.noteHealth(ViewHealth{OK: true}, nil)
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			return errors.Join(errs...) // shutting down: no failure of dnsd's
		}
		w.errs.WithLabelValues(why).Inc()
		reason = why
	}
	err := errors.Join(errs...)
	prev := w.Health()
	h := ViewHealth{Reason: reason, Since: prev.Since, Failures: prev.Failures + 1}
	if prev.Since.IsZero() {
		h.Since = w.o.Clock()
	}
	w.noteHealth(h, err)
	return err
}

// noteHealth makes h the view's health, logging at warn the change from
// readable (or never tried) to unreadable, with err, and back. The caller
// holds mu.
func (w *ViewWatcher) noteHealth(h ViewHealth, err error) {
	prev := w.health.Swap(&h)
	switch {
	case h.OK && prev.Failures > 0:
		w.log.Warn("group view readable again", "group", w.o.Group, "failures", prev.Failures,
			"unreadable_for", w.o.Clock().Sub(prev.Since).Round(time.Millisecond).String())
	case !h.OK && prev.Failures == 0:
		args := []any{"group", w.o.Group, "reason", h.Reason, "err", err}
		if snap := w.Snapshot(); snap != nil {
			args = append(args, "view_fetched", snap.Fetched)
		}
		w.log.Warn("group view can not be read: redirects stop once the view is stale, a dispatcher answers 503 once it has expired", args...)
	}
}

// refresh asks src for the view once; it returns the refresh result
// (viewOK …), and for a failure its reason (ViewErr…) and error.
func (w *ViewWatcher) refresh(ctx context.Context, src *viewSource) (result, reason string, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
	defer cancel()
	v, err := src.api.Group(ctx, w.o.Group)
	var se *api.StatusError
	switch {
	case errors.As(err, &se):
		return viewHTTPError, ViewErrRefused, fmt.Errorf("%w: %w", ErrBadView, err)
	case errors.Is(err, api.ErrTooLarge):
		return viewInvalid, ViewErrTooLarge, fmt.Errorf("%w: %w", ErrBadView, err)
	case errors.Is(err, api.ErrResponse):
		return viewInvalid, ViewErrMalformed, fmt.Errorf("%w: %w", ErrBadView, err)
	case err != nil:
		return viewNetwork, ViewErrUnreachable, fmt.Errorf("mirror: view: %w", err)
	}
	if !sameHost(v.Name, w.o.Group) {
		return viewInvalid, ViewErrInvalid, fmt.Errorf("%w: view of %q, want %q", ErrBadView, v.Name, w.o.Group)
	}
	now := w.o.Clock()
	s, err := NewGroupSnapshot(v, w.o.Self, now, StaleViews*w.o.Interval, w.o.Booking)
	if err != nil {
		return viewInvalid, ViewErrInvalid, fmt.Errorf("%w: %w", ErrBadView, err)
	}
	w.noteDropped(w.cur.Swap(s), s)
	w.lastOK.Set(float64(now.UnixNano()) / 1e9)
	return viewOK, "", nil
}

// maxLoggedNames bounds the member names one log line lists.
const maxLoggedNames = 10

// noteDropped sets the dropped-candidates gauge from the new snapshot s
// and logs, at warn, the members dropped for a reason whose list differs
// from that of the previous snapshot prev (nil: none): once per change of
// the view, never per request.
func (w *ViewWatcher) noteDropped(prev, s *GroupSnapshot) {
	for _, r := range DropReasons() {
		names := s.dropped[r]
		w.dropped.WithLabelValues(r).Set(float64(len(names)))
		var before []string
		if prev != nil {
			before = prev.dropped[r]
		}
		if len(names) > 0 && !slices.Equal(names, before) {
			w.log.Warn("group view: members left out as redirect targets", "group", w.o.Group, "reason", r,
				"count", len(names), "members", names[:min(len(names), maxLoggedNames)])
		}
	}
}

// sameHost compares host names case-insensitively, ignoring a trailing dot.
func sameHost(a, b string) bool {
	return a != "" && strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

// ValidHostName accepts a DNS host name of letters, digits and hyphens
// (a trailing dot allowed).
func ValidHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(isLetter(c) || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// viewWatermarks returns the group's watermarks as view carries them
// (its policy's), or the scheduler's defaults when both are 0, as
// scheduler.Params reads them.
func viewWatermarks(view api.GroupView) (low, high float64) {
	if view.Watermarks.Low == 0 && view.Watermarks.High == 0 {
		return scheduler.DefaultLowWatermark, scheduler.DefaultHighWatermark
	}
	return view.Watermarks.Low, view.Watermarks.High
}

// Watermarks returns the group's watermarks, low and high: the view's
// (the policy's in dnsd.yaml), or the scheduler's defaults when the view
// has none or s is nil.
func (s *GroupSnapshot) Watermarks() (low, high float64) {
	if s == nil {
		return scheduler.DefaultLowWatermark, scheduler.DefaultHighWatermark
	}
	return viewWatermarks(s.View)
}
