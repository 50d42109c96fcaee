package probe

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Watcher defaults.
const (
	// DefaultInterval is a member's default probe interval.
	DefaultInterval = 5 * time.Second
	// DefaultMaxInFlight is the default cap on probes in flight.
	DefaultMaxInFlight = 256
	minInterval        = 10 * time.Millisecond
	maxDefaultTimeout  = 10 * time.Second
)

// MemberSpec is one member a Watcher watches.
type MemberSpec struct {
	// Group and Member name the member; together they are its key.
	Group, Member string
	// URL is the member's load report URL (GET /v1/load); empty for a
	// push-only member.
	URL string
	// Interval is the time between probes (default DefaultInterval, at
	// least 10ms). Pushes go stale after 2×Interval.
	Interval time.Duration
	// Jitter is the most a probe is delayed at random past its slot
	// (default Interval/10, at most Interval).
	Jitter time.Duration
	// Timeout bounds one probe (default 80 % of Interval, at most 10s; it
	// may not exceed Interval).
	Timeout time.Duration
	// Capacity is the member's configured capacity, in load units: a
	// report whose load is more than MaxLoadRatio times it is not
	// believed. 0 takes the capacity the report gives.
	Capacity float64
	// PublicOnly limits the probes to the addresses that the client's
	// ClientOptions.Public accepts (a run-time member of a group without
	// allow_private): checked when a connection is made, after the host
	// name is resolved.
	PublicOnly bool
}

// withDefaults fills in the defaults and checks spec.
func (s MemberSpec) withDefaults() (MemberSpec, error) {
	var errs []error
	if err := checkName(s.Group); err != nil {
		errs = append(errs, fmt.Errorf("group: %w", err))
	}
	if err := checkName(s.Member); err != nil {
		errs = append(errs, fmt.Errorf("member: %w", err))
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("url: %w", err))
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			errs = append(errs, fmt.Errorf("url %q: want an absolute http or https URL", s.URL))
		}
	}
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	if s.Jitter == 0 {
		s.Jitter = s.Interval / 10
	}
	if s.Timeout == 0 {
		s.Timeout = min(s.Interval*8/10, maxDefaultTimeout)
	}
	switch {
	case s.Interval < minInterval:
		errs = append(errs, fmt.Errorf("interval %s: want at least %s", s.Interval, minInterval))
	case s.Jitter < 0 || s.Jitter > s.Interval:
		errs = append(errs, fmt.Errorf("jitter %s: want between 0 and the interval %s", s.Jitter, s.Interval))
	case s.Timeout <= 0 || s.Timeout > s.Interval:
		errs = append(errs, fmt.Errorf("timeout %s: want more than 0 and at most the interval %s", s.Timeout, s.Interval))
	}
	if !(s.Capacity >= 0) || math.IsInf(s.Capacity, 0) {
		errs = append(errs, fmt.Errorf("capacity %g: want a finite number, at least 0", s.Capacity))
	}
	if len(errs) > 0 {
		return s, fmt.Errorf("%w: %s/%s: %w", ErrInvalidSpec, s.Group, s.Member, errors.Join(errs...))
	}
	return s, nil
}

// MemberStatus is what a Watcher knows about one member.
type MemberStatus struct {
	// Spec is the member's spec, defaults filled in.
	Spec MemberSpec
	// State is the member's health.
	State State
	// LastChange is when State last changed, zero if never.
	LastChange time.Time
	// Flapping is true while the member needs 2×rise to come up.
	Flapping bool
	// Report is the newest report, pulled or pushed; HasReport is false
	// until there is one.
	Report    Report
	HasReport bool
	// LastProbe is when the last pull probe ended, zero if never.
	LastProbe time.Time
	// LastReason and LastError describe the last failure, pull or stale;
	// both are empty after a success.
	LastReason Reason
	LastError  string
	// LastPush is when the last accepted push arrived, zero if never.
	LastPush time.Time
}

// WatcherConfig configures a Watcher.
type WatcherConfig struct {
	// Registerer gets the Watcher's metrics (required).
	Registerer prometheus.Registerer
	// Rand draws the probes' jitter; seeded by the caller (required). The
	// Watcher uses it under its own lock.
	Rand *rand.Rand
	// Logger gets state changes (default discards).
	Logger *slog.Logger
	// Client makes the probes (default NewClient(ClientOptions{})).
	Client *http.Client
	// Health is the hysteresis of every member.
	Health HealthConfig
	// MaxInFlight caps the probes in flight (default DefaultMaxInFlight).
	MaxInFlight int
	// OnEvent, when set, is called with every state change, in order and
	// one at a time. It may call State, and must not
	// block or call the Watcher's other methods.
	OnEvent func(Event)
	// OnUpdate, when set, is called after OnEvent with every change of
	// what the Watcher knows of a member that answers depend on: a new
	// state, a newer report, or both. Calls are in order and one at a time,
	// with the same rules as OnEvent.
	OnUpdate func(Update)
	// Now is the clock for probe results and staleness (default time.Now);
	// Push takes its time from its caller and should use the same clock.
	Now func() time.Time
}

// Update is a member's state and newest report after a change of either.
type Update struct {
	// Group and Member name the member.
	Group, Member string
	// State is the member's health.
	State State
	// Report is the newest report, valid when HasReport.
	Report    Report
	HasReport bool
}

type memberKey struct{ group, member string }

// member is the Watcher's record of one member, guarded by Watcher.mu.
type member struct {
	key      memberKey
	spec     MemberSpec
	health   *Health
	met      memberMetrics
	idx      int       // in Watcher.queue
	nominal  time.Time // the slot of the next probe, before jitter
	due      time.Time // when the next probe is due
	report   Report
	hasRep   bool
	lastPoll time.Time
	reason   Reason
	errText  string
	lastPush time.Time
}

// Watcher watches members' health: a single scheduler goroutine (Run)
// polls each member's load report on a timer heap, with jitter, at most one
// probe per member and MaxInFlight in all in flight; pushed reports count
// as successes and suspend polling while they are fresh. A Watcher is safe
// for concurrent use.
type Watcher struct {
	cfg     WatcherConfig
	log     *slog.Logger
	met     *metrics
	wake    chan struct{}
	running atomic.Bool
	wg      sync.WaitGroup

	evMu sync.Mutex // serializes OnEvent calls, taken before mu is released

	mu       sync.Mutex
	members  map[memberKey]*member
	groups   map[string]int // members per group
	busy     map[memberKey]struct{}
	queue    memberQueue
	inFlight int
}

// NewWatcher returns a Watcher with no members and registers its metrics.
func NewWatcher(cfg WatcherConfig) (*Watcher, error) {
	if cfg.Registerer == nil {
		return nil, fmt.Errorf("%w: watcher: Registerer is required", ErrInvalidSpec)
	}
	if cfg.Rand == nil {
		return nil, fmt.Errorf("%w: watcher: Rand is required", ErrInvalidSpec)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		cfg.Client = NewClient(ClientOptions{})
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Health = cfg.Health.withDefaults()
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("probe: registering metrics: %w", err)
	}
	return &Watcher{
		cfg:     cfg,
		log:     cfg.Logger,
		met:     met,
		wake:    make(chan struct{}, 1),
		members: make(map[memberKey]*member),
		groups:  make(map[string]int),
		busy:    make(map[memberKey]struct{}),
	}, nil
}

func (w *Watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// draw returns a random duration in [0, d); w.mu held.
func (w *Watcher) draw(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(w.cfg.Rand.Int64N(int64(d)))
}

// Add starts watching a new member, StateUnknown, with its first probe at
// a random point of its first interval.
func (w *Watcher) Add(spec MemberSpec) error {
	spec, err := spec.withDefaults()
	if err != nil {
		return err
	}
	k := memberKey{spec.Group, spec.Member}
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.members[k]; ok {
		return fmt.Errorf("%w: %s/%s", ErrMemberExists, spec.Group, spec.Member)
	}
	m := &member{
		key:    k,
		spec:   spec,
		health: NewHealth(spec.Group, spec.Member, w.cfg.Health),
		met:    w.met.member(spec.Group, spec.Member),
	}
	m.met.setState(StateUnknown)
	w.members[k] = m
	w.groups[spec.Group]++
	w.scheduleFirst(m, now)
	heap.Push(&w.queue, m)
	w.signal()
	return nil
}

// scheduleFirst puts m's next slot at a random point of one interval from
// now; w.mu held.
func (w *Watcher) scheduleFirst(m *member, now time.Time) {
	m.nominal = now.Add(w.draw(m.spec.Interval))
	m.due = m.nominal.Add(w.draw(m.spec.Jitter))
}

// Update changes a watched member's URL, interval, jitter or timeout,
// keeping its health; a new interval reschedules it.
func (w *Watcher) Update(spec MemberSpec) error {
	spec, err := spec.withDefaults()
	if err != nil {
		return err
	}
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	m, ok := w.members[memberKey{spec.Group, spec.Member}]
	if !ok {
		return fmt.Errorf("%w: %s/%s", ErrUnknownMember, spec.Group, spec.Member)
	}
	old := m.spec
	m.spec = spec
	if old.Interval != spec.Interval || old.Jitter != spec.Jitter || old.URL != spec.URL {
		w.scheduleFirst(m, now)
		heap.Fix(&w.queue, m.idx)
		w.signal()
	}
	return nil
}

// SetHealth changes the hysteresis of every member, present and future (a
// reload); states and the current runs of results are kept.
func (w *Watcher) SetHealth(cfg HealthConfig) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cfg.Health = cfg.withDefaults()
	for _, m := range w.members {
		m.health.SetConfig(w.cfg.Health)
	}
}

// Remove stops watching a member and deletes its metric label values (and
// its group's, when it was the group's last member). A probe in flight
// finishes and is ignored.
func (w *Watcher) Remove(group, member string) error {
	k := memberKey{group, member}
	w.mu.Lock()
	defer w.mu.Unlock()
	m, ok := w.members[k]
	if !ok {
		return fmt.Errorf("%w: %s/%s", ErrUnknownMember, group, member)
	}
	delete(w.members, k)
	heap.Remove(&w.queue, m.idx)
	w.met.deleteMember(group, member)
	if w.groups[group]--; w.groups[group] == 0 {
		delete(w.groups, group)
		w.met.deleteGroup(group)
	}
	w.signal()
	return nil
}

// Push takes a pushed report at now, its signature verified and the report
// decoded and valid (Validate: dnsd's intake checks it once, before): it
// counts as a successful probe of its member, and the member is not polled
// while its pushes are fresh (within 2× its interval). A member without a
// probe URL is unknown until its first push.
//
// A report that is not believed is refused and changes nothing (not the
// report, not the health, not the time of the last push), so that a member
// whose pushes are all refused goes stale and is polled, or, without a
// probe URL, counted stale. It is refused when its time is
// more than HealthConfig.ReportMaxSkew ahead of now (ErrReportFuture) or
// more than ReportMaxAge behind (ErrReportStale), when its load is more
// than MaxLoadRatio times the member's capacity (ErrAbsurdLoad), and when
// it is not newer than the member's newest report, pulled or pushed
// (ErrReportOutOfOrder: a replay or a reordering). Order is by time, not
// by seq, since seq starts again at 1 when the mirror restarts: a report
// with a lower seq and a newer time is a restarted mirror's and is taken.
func (w *Watcher) Push(r Report, now time.Time) error {
	w.mu.Lock()
	m, ok := w.members[memberKey{r.Group, r.Member}]
	if !ok {
		group := ""
		if w.groups[r.Group] > 0 {
			group = r.Group
		}
		w.mu.Unlock()
		w.met.pushes.WithLabelValues(group, "rejected").Inc()
		return fmt.Errorf("%w: %s/%s", ErrUnknownMember, r.Group, r.Member)
	}
	if m.hasRep && r.Seq == m.report.Seq && r.Time.Equal(m.report.Time) && r.Load == m.report.Load {
		// The member's newest report again: a mirror that sent it again
		// (its retry of a push whose answer it lost). Taken, with no
		// effect; a replay of the HTTP request is the signature's to
		// refuse.
		w.mu.Unlock()
		w.met.pushes.WithLabelValues(r.Group, "duplicate").Inc()
		return nil
	}
	if err := w.believe(m, r, now); err != nil {
		w.mu.Unlock()
		w.met.pushes.WithLabelValues(r.Group, "rejected").Inc()
		return err
	}
	w.met.pushes.WithLabelValues(r.Group, "accepted").Inc()
	first := m.lastPush.IsZero()
	if now.After(m.lastPush) {
		m.lastPush = now
	}
	if first {
		// A parked push-only member: due now, to be looked at again
		// when the push goes stale.
		m.nominal, m.due = now, now
		heap.Fix(&w.queue, m.idx)
	}
	fresh := m.setReport(r)
	m.reason, m.errText = ReasonNone, ""
	ev, changed := m.health.Observe(now, true, "push")
	w.unlockAndEmit(m, ev, changed, fresh)
	if first {
		w.signal()
	}
	return nil
}

// parkedFor is how long a push-only member that has not pushed yet waits
// before the scheduler looks at it again, unless its first push comes
// first (it changes nothing until then).
const parkedFor = time.Hour

// believe returns why a valid pushed report for m is not believed at now,
// nil if it is; w.mu held.
func (w *Watcher) believe(m *member, r Report, now time.Time) error {
	if err := r.CheckTime(now, w.cfg.Health.ReportMaxSkew, w.cfg.Health.ReportMaxAge); err != nil {
		return err
	}
	if err := r.CheckLoad(m.capacity(r)); err != nil {
		return err
	}
	if !m.hasRep || r.Time.After(m.report.Time) {
		return nil
	}
	last := m.report
	if r.Seq < last.Seq {
		return fmt.Errorf("%w: seq: %d after %d, and time: %s not after the newest report's %s",
			ErrReportOutOfOrder, r.Seq, last.Seq, r.Time.Format(time.RFC3339Nano), last.Time.Format(time.RFC3339Nano))
	}
	return fmt.Errorf("%w: time: %s not after the newest report's %s",
		ErrReportOutOfOrder, r.Time.Format(time.RFC3339Nano), last.Time.Format(time.RFC3339Nano))
}

// capacity is the capacity r's load is bounded by: the spec's, else the
// report's own.
func (m *member) capacity(r Report) float64 {
	if m.spec.Capacity > 0 {
		return m.spec.Capacity
	}
	return r.Capacity
}

// setReport keeps r if it is not older than the report m has, and reports
// whether it did.
func (m *member) setReport(r Report) bool {
	if !m.hasRep || !r.Time.Before(m.report.Time) {
		m.report, m.hasRep = r, true
		return true
	}
	return false
}

// unlockAndEmit records a state change, releases w.mu and calls OnEvent
// (on a change) and OnUpdate (on a change or a new report), keeping them
// in order.
func (w *Watcher) unlockAndEmit(m *member, ev Event, changed, newReport bool) {
	if !changed && !(newReport && w.cfg.OnUpdate != nil) {
		w.mu.Unlock()
		return
	}
	up := Update{Group: m.key.group, Member: m.key.member, State: m.health.State(), Report: m.report, HasReport: m.hasRep}
	if !changed {
		w.evMu.Lock()
		w.mu.Unlock()
		defer w.evMu.Unlock()
		w.cfg.OnUpdate(up)
		return
	}
	m.met.setState(ev.To)
	w.met.changes.WithLabelValues(ev.Group, ev.To.String()).Inc()
	w.log.Info("member state changed", "group", ev.Group, "member", ev.Member,
		"from", ev.From.String(), "to", ev.To.String(), "reason", ev.Reason)
	w.evMu.Lock()
	w.mu.Unlock()
	defer w.evMu.Unlock()
	if w.cfg.OnEvent != nil {
		w.cfg.OnEvent(ev)
	}
	if w.cfg.OnUpdate != nil {
		w.cfg.OnUpdate(up)
	}
}

// status returns m's status; w.mu held.
func (w *Watcher) status(m *member, now time.Time) MemberStatus {
	return MemberStatus{
		Spec:       m.spec,
		State:      m.health.State(),
		LastChange: m.health.LastChange(),
		Flapping:   m.health.Flapping(now),
		Report:     m.report,
		HasReport:  m.hasRep,
		LastProbe:  m.lastPoll,
		LastReason: m.reason,
		LastError:  m.errText,
		LastPush:   m.lastPush,
	}
}

// State returns a member's status, and false when it is not watched.
func (w *Watcher) State(group, member string) (MemberStatus, bool) {
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	m, ok := w.members[memberKey{group, member}]
	if !ok {
		return MemberStatus{}, false
	}
	return w.status(m, now), true
}

// Run schedules probes until ctx is done, then waits for the probes in
// flight (each bounded by its timeout) and returns nil. Only one Run may
// be active at a time.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer w.running.Store(false)
	// Probes in flight at shutdown finish within their own timeouts.
	probeCtx := context.WithoutCancel(ctx)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if wait := w.dispatch(probeCtx); wait >= 0 {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			w.wg.Wait()
			return nil
		case <-timer.C:
		case <-w.wake:
		}
	}
}

// dispatch handles every member that is due: starts its probe, or
// reschedules it when it is busy or its pushes are fresh. It returns how
// long until the next member is due, or -1 when there is none or the
// in-flight cap is reached (a finishing probe wakes the scheduler).
func (w *Watcher) dispatch(ctx context.Context) time.Duration {
	now := w.cfg.Now()
	w.mu.Lock()
	for len(w.queue) > 0 {
		m := w.queue[0]
		if m.due.After(now) {
			wait := m.due.Sub(now)
			w.mu.Unlock()
			return wait
		}
		stale := 2 * m.spec.Interval
		switch _, busy := w.busy[m.key]; {
		case !m.lastPush.IsZero() && now.Sub(m.lastPush) < stale:
			// Fresh pushes: look again when they would go stale.
			m.nominal = m.lastPush.Add(stale)
			m.due = m.nominal.Add(w.draw(m.spec.Jitter))
			heap.Fix(&w.queue, 0)
			continue
		case busy:
			w.next(m, now)
			continue
		case m.spec.URL == "" && m.lastPush.IsZero():
			// Push-only and no push yet: unknown until the first, which
			// schedules it again (Push); parked meanwhile, so that
			// members that never push cost no wake-ups.
			m.nominal = now.Add(parkedFor)
			m.due = m.nominal
			heap.Fix(&w.queue, 0)
			continue
		case m.spec.URL == "":
			w.next(m, now)
			m.reason, m.errText = ReasonStale, "no push for "+stale.String()
			w.met.failures.WithLabelValues(m.spec.Group, string(ReasonStale)).Inc()
			ev, changed := m.health.Observe(now, false, string(ReasonStale)+": "+m.errText)
			w.unlockAndEmit(m, ev, changed, false)
			w.mu.Lock()
			continue
		case w.inFlight >= w.cfg.MaxInFlight:
			w.mu.Unlock()
			return -1
		}
		w.next(m, now)
		w.busy[m.key] = struct{}{}
		w.inFlight++
		w.met.inFlight.Inc()
		w.wg.Add(1)
		go w.probe(ctx, m, m.spec)
	}
	w.mu.Unlock()
	return -1
}

// next moves m to its next slot; w.mu held and m at the top of the queue.
func (w *Watcher) next(m *member, now time.Time) {
	iv := m.spec.Interval
	m.nominal = m.nominal.Add(iv)
	if behind := now.Sub(m.nominal); behind >= iv {
		// Missed whole slots (Run started late, or the cap was
		// reached): skip them and keep the member's phase, so members
		// do not line up into bursts.
		m.nominal = m.nominal.Add((behind/iv + 1) * iv)
	}
	m.due = m.nominal.Add(w.draw(m.spec.Jitter))
	heap.Fix(&w.queue, m.idx)
}

// probe runs one pull probe of spec (m's when it was due) and records
// its result.
func (w *Watcher) probe(ctx context.Context, m *member, spec MemberSpec) {
	defer w.wg.Done()
	target := spec.URL
	pctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	if spec.PublicOnly {
		pctx = PublicOnly(pctx)
	}
	res := ProbeLoad(pctx, w.cfg.Client, target, w.log)
	cancel()
	if res.Success && (!SameGroup(res.Report.Group, m.key.group) || res.Report.Member != m.key.member) {
		res.Success, res.Reason = false, ReasonValidate
		res.Err = fmt.Errorf("%w: %s: report is for %s/%s", ErrProbe, ReasonValidate, res.Report.Group, res.Report.Member)
	}
	now := w.cfg.Now()

	w.mu.Lock()
	if res.Success {
		if err := res.Report.CheckLoad(m.capacity(res.Report)); err != nil {
			res.Success, res.Reason = false, ReasonValidate
			res.Err = fmt.Errorf("%w: %s: %w", ErrProbe, ReasonValidate, err)
		} else if res.Report.CheckTime(now, w.cfg.Health.ReportMaxSkew, w.cfg.Health.ReportMaxAge) != nil {
			// The member's clock is off, but the figures are
			// fresh: they were taken as the probe asked.
			res.Report.Time = now
			w.met.retimed.WithLabelValues(m.key.group).Inc()
		}
	}
	delete(w.busy, m.key)
	if w.inFlight == w.cfg.MaxInFlight { // the scheduler may wait for a slot
		w.signal()
	}
	w.inFlight--
	w.met.inFlight.Dec()
	if w.members[m.key] != m { // removed (and maybe added again) meanwhile
		w.mu.Unlock()
		return
	}
	m.lastPoll = now
	m.met.duration.Observe(res.Phases.Total.Seconds())
	var reason string
	fresh := false
	if res.Success {
		m.met.ok.Inc()
		fresh = m.setReport(res.Report)
		m.reason, m.errText = ReasonNone, ""
	} else {
		m.met.fail.Inc()
		w.met.failures.WithLabelValues(m.key.group, string(res.Reason)).Inc()
		m.reason, m.errText = res.Reason, res.Err.Error()
		reason = m.errText
	}
	ev, changed := m.health.Observe(now, res.Success, reason)
	w.unlockAndEmit(m, ev, changed, fresh)
}

// memberQueue is a min-heap of members by due time.
type memberQueue []*member

func (q memberQueue) Len() int           { return len(q) }
func (q memberQueue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q memberQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}
func (q *memberQueue) Push(x any) {
	m := x.(*member)
	m.idx = len(*q)
	*q = append(*q, m)
}
func (q *memberQueue) Pop() any {
	old := *q
	m := old[len(old)-1]
	old[len(old)-1] = nil
	m.idx = -1
	*q = old[:len(old)-1]
	return m
}
