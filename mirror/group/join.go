package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/probe/api"
)

// Defaults of a Joiner.
const (
	// DefaultJoinBackoff is the first wait before a GROUP-ADD is sent
	// again to a dnsd that did not take it; it doubles after each failure
	// up to DefaultJoinMaxBackoff.
	DefaultJoinBackoff = 250 * time.Millisecond
	// DefaultJoinMaxBackoff is the longest wait between two GROUP-ADDs.
	DefaultJoinMaxBackoff = 30 * time.Second
	// DefaultJoinCheckInterval is how often a joined mirror asks each
	// dnsd whether it still has the member (join.check_interval).
	DefaultJoinCheckInterval = 30 * time.Second
	// DefaultLeaveWait is the leave's wait when neither join.leave_wait
	// nor a group view says how long answers are cached: dnsd's default
	// ttl.max.
	DefaultLeaveWait = 5 * time.Minute
	// leaveAttempts is how many times a drain or a GROUP-EXIT is sent to
	// one dnsd before the leave goes on without it.
	leaveAttempts = 3
)

// States of a Joiner, the values of the state label of
// transmirror_mirror_join_state.
const (
	JoinJoining  = "joining"  // GROUP-ADD not yet taken by every dnsd
	JoinJoined   = "joined"   // a member on every dnsd
	JoinConflict = "conflict" // a dnsd has another member of this name
	JoinDraining = "draining" // leaving: drain sent
	JoinWaiting  = "waiting"  // leaving: serving while cached answers run out
	JoinLeaving  = "leaving"  // leaving: GROUP-EXIT sent
	JoinLeft     = "left"     // out of the group
)

var joinStates = []string{JoinJoining, JoinJoined, JoinConflict, JoinDraining, JoinWaiting, JoinLeaving, JoinLeft}

// ErrJoinConflict is why a mirror can not join: the group already has a
// member of its name with other settings, from dnsd's config file or
// added by an operator. Remove that member or rename this mirror.
var ErrJoinConflict = errors.New("mirror: join: the group has another member of this name")

// JoinerOptions configure a Joiner.
type JoinerOptions struct {
	// URLs are the admin base URLs of dnsd (at least one). Membership is
	// changed on every one of them: without a shared store each dnsd has
	// its own members, with one the second change finds it done.
	URLs []string
	// Group is the group's name (required).
	Group string
	// Member is this mirror as GROUP-ADD takes it (Name, Host, Addresses
	// and Capacity required); Joined is set by the Joiner.
	Member api.MemberInfo
	// Secret is the group's secret, which signs every change (required).
	Secret []byte
	// LeaveWait is how long Leave keeps the mirror serving after its
	// drain; 0: the group's ttl.max from View, or DefaultLeaveWait. At
	// most MaxLeaveWait.
	LeaveWait time.Duration
	// View returns the latest group view, nil when there is none (the
	// ViewWatcher's); nil: Leave asks dnsd.
	View func() *api.GroupView
	// Timeout bounds one request (default DefaultPushTimeout).
	Timeout time.Duration
	// Backoff and MaxBackoff are the first and the longest wait between
	// two GROUP-ADDs to a dnsd that did not take it (defaults
	// DefaultJoinBackoff and DefaultJoinMaxBackoff); each wait is drawn
	// within ±20 % of it, so that mirrors that failed together (a dnsd
	// that was away) do not all come back in the same instant.
	Backoff, MaxBackoff time.Duration
	// Rand draws the waits (default: seeded at random).
	Rand *rand.Rand
	// CheckInterval is how often, once joined, each dnsd is asked
	// whether it still has the member; one that has lost it (an
	// operator removed it, or its state was lost) is joined again
	// (default DefaultJoinCheckInterval).
	CheckInterval time.Duration
	// Client sends the requests (default: api.Client's).
	Client *http.Client
	// Clock gives the time of signatures (default time.Now).
	Clock func() time.Time
	// Logger gets the join and the leave, and failures once per failing
	// spell of each dnsd (default: discard).
	Logger *slog.Logger
	// Registerer, when set, gets transmirror_mirror_join_state{state},
	// transmirror_mirror_join_requests_total{dnsd,op,result} and
	// transmirror_mirror_leave_wait_seconds.
	Registerer prometheus.Registerer
}

// Joiner is a mirror's own membership (GROUP-ADD at start, a graceful
// GROUP-EXIT at the end). Run adds the mirror to the group on every dnsd,
// idempotently: a member of its name with the same settings (this mirror
// before a restart) is kept, and undrained if a leave was cut short; one
// with other settings that joined by itself is replaced; any other is a
// conflict, retried with backoff and logged once. Once joined, a dnsd
// that loses the member (an operator removed it, or a dnsd without a
// shared store lost its state file) is joined again within CheckInterval;
// a drain by an operator is left as it is. Leave drains the member
// on every dnsd, waits while cached answers run out (the mirror still
// serving), then sends GROUP-EXIT.
type Joiner struct {
	o       JoinerOptions
	targets []*joinTarget
	log     *slog.Logger

	state    *prometheus.GaugeVec
	requests *prometheus.CounterVec
	wait     prometheus.Gauge

	mu     sync.Mutex // guards cur, joined and o.Rand
	cur    string
	joined int // targets that have the member
}

// jittered returns d scaled by a factor drawn in [0.8, 1.2).
func (j *Joiner) jittered(d time.Duration) time.Duration {
	j.mu.Lock()
	f := 0.8 + 0.4*j.o.Rand.Float64()
	j.mu.Unlock()
	return time.Duration(float64(d) * f)
}

// joinTarget is one dnsd.
type joinTarget struct {
	label    string // the URL's index, the dnsd label
	url      string // for logs
	api      *api.Client
	spell    spell
	conflict bool // the last attempt was refused as a conflict
}

// NewJoiner checks o and returns a Joiner in state joining.
func NewJoiner(o JoinerOptions) (*Joiner, error) {
	m := o.Member
	switch {
	case len(o.URLs) == 0:
		return nil, errors.New("mirror: join: a dnsd URL is required")
	case o.Group == "" || len(o.Secret) == 0:
		return nil, errors.New("mirror: join: group and secret are required")
	case m.Name == "" || m.Host == "" || len(m.Addresses) == 0 || !(m.Capacity > 0):
		return nil, errors.New("mirror: join: the member's name, host, addresses and capacity are required")
	case o.LeaveWait < 0 || o.LeaveWait > MaxLeaveWait:
		return nil, fmt.Errorf("mirror: join: leave wait %s: want 0..%s", o.LeaveWait, MaxLeaveWait)
	}
	o.Member.Joined = true
	if o.Timeout <= 0 {
		o.Timeout = DefaultPushTimeout
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultJoinBackoff
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(o.Backoff, DefaultJoinMaxBackoff)
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = DefaultJoinCheckInterval
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	j := &Joiner{
		o: o, log: o.Logger,
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "join_state",
			Help: "The mirror's own membership: 1 for the state it is in (joining, joined, conflict, draining, waiting, leaving, left), 0 for the others.",
		}, []string{"state"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "join_requests_total",
			Help: "Membership requests to dnsd (the index of its URL), by operation (add, view, undrain, remove, check, drain, exit) and result (ok, error).",
		}, []string{"dnsd", "op", "result"}),
		wait: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "leave_wait_seconds",
			Help: "How long the leave keeps serving after the drain, once it is known (0 before the leave).",
		}),
	}
	if j.log == nil {
		j.log = slog.New(slog.DiscardHandler)
	}
	for i, u := range o.URLs {
		c, err := api.NewClient(u, api.ClientOptions{HTTP: o.Client, Secret: o.Secret, Clock: o.Clock, MaxResponse: MaxViewSize})
		if err != nil {
			return nil, fmt.Errorf("mirror: join: %w", err)
		}
		t := &joinTarget{label: strconv.Itoa(i), url: c.URL(api.AddMember, o.Group), api: c}
		t.spell = spell{log: j.log, what: "group join", target: t.url}
		j.targets = append(j.targets, t)
		for _, op := range []string{"add", "view", "undrain", "remove", "check", "drain", "exit"} {
			for _, r := range []string{"ok", "error"} {
				j.requests.WithLabelValues(t.label, op, r)
			}
		}
	}
	j.setState(JoinJoining)
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{j.state, j.requests, j.wait} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("mirror: join: register metrics: %w", err)
			}
		}
	}
	return j, nil
}

// State returns the Joiner's state (one of JoinJoining … JoinLeft).
func (j *Joiner) State() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.cur
}

// Status returns the Joiner's state and how many of its dnsd have the
// member, for the status page.
func (j *Joiner) Status() JoinStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	return JoinStatus{State: j.cur, Joined: j.joined, DNSD: len(j.targets)}
}

func (j *Joiner) setState(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.setStateLocked(s)
}

func (j *Joiner) setStateLocked(s string) {
	j.cur = s
	for _, st := range joinStates {
		v := 0.0
		if st == s {
			v = 1
		}
		j.state.WithLabelValues(st).Set(v)
	}
}

// Run joins the group on every dnsd, each retried with backoff until it
// has the member, then asks each one every CheckInterval whether it still
// has it, and joins again on one that lost it, until ctx is done; it
// returns nil then.
func (j *Joiner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, t := range j.targets {
		wg.Go(func() {
			for ctx.Err() == nil {
				j.joinLoop(ctx, t)
				j.watch(ctx, t)
			}
		})
	}
	wg.Wait()
	return nil
}

// watch asks t every CheckInterval whether it has the member, and returns
// when it does not (after counting it out of the joined) or ctx is done.
// A check that fails (t down, an error) changes nothing: a dnsd that can
// not answer can not say it lost the member.
func (j *Joiner) watch(ctx context.Context, t *joinTarget) {
	tick := time.NewTicker(j.o.CheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var v api.GroupView
		if err := j.call(ctx, t, "check", func(ctx context.Context) (err error) {
			v, err = t.api.Group(ctx, j.o.Group)
			return err
		}); err != nil {
			continue
		}
		if slices.ContainsFunc(v.Members, func(m api.MemberView) bool { return m.Name == j.o.Member.Name }) {
			continue
		}
		j.mu.Lock()
		j.joined--
		if j.cur == JoinJoined {
			j.setStateLocked(JoinJoining)
		}
		j.mu.Unlock()
		j.log.Warn("dnsd no longer has this member (removed, or its state lost): joining again",
			"url", t.url, "member", j.o.Member.Name)
		return
	}
}

// joinLoop joins on t until it worked or ctx is done.
func (j *Joiner) joinLoop(ctx context.Context, t *joinTarget) {
	backoff := j.o.Backoff
	for {
		how, err := j.join(ctx, t)
		result := "ok"
		if err != nil {
			result = "error"
			if errors.Is(err, ErrJoinConflict) {
				result = JoinConflict
			}
		}
		t.spell.note(ctx, result, err)
		j.mu.Lock()
		t.conflict = errors.Is(err, ErrJoinConflict)
		if err == nil {
			j.joined++
		}
		if j.cur == JoinJoining || j.cur == JoinConflict {
			j.setStateLocked(j.next())
		}
		j.mu.Unlock()
		if err == nil {
			j.log.Info("joined the group", "url", t.url, "member", j.o.Member.Name, "how", how)
			return
		}
		timer := time.NewTimer(j.jittered(backoff))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, j.o.MaxBackoff)
	}
}

// next is the state while joining: joined once every dnsd has the
// member, conflict while one refuses it as such, else joining. Called
// with j.mu held.
func (j *Joiner) next() string {
	switch {
	case j.joined == len(j.targets):
		return JoinJoined
	case slices.ContainsFunc(j.targets, func(t *joinTarget) bool { return t.conflict }):
		return JoinConflict
	}
	return JoinJoining
}

// join sends one GROUP-ADD to t and, when t has a member of this name
// already, decides what to do with it (see Joiner). It returns how the
// mirror became a member: added, kept, undrained or replaced.
func (j *Joiner) join(ctx context.Context, t *joinTarget) (string, error) {
	err := j.call(ctx, t, "add", func(ctx context.Context) error {
		_, err := t.api.AddMember(ctx, j.o.Group, j.o.Member)
		return err
	})
	var se *api.StatusError
	if err == nil {
		return "added", nil
	}
	if !errors.As(err, &se) || se.Code != http.StatusConflict {
		return "", err
	}
	// 409: a member of this name, or no room for one more.
	var v api.GroupView
	if err := j.call(ctx, t, "view", func(ctx context.Context) (err error) {
		v, err = t.api.Group(ctx, j.o.Group)
		return err
	}); err != nil {
		return "", err
	}
	i := slices.IndexFunc(v.Members, func(m api.MemberView) bool { return m.Name == j.o.Member.Name })
	if i < 0 {
		return "", err // gone since, or the group is full: try again later
	}
	have := v.Members[i]
	switch {
	case have.Source != "runtime":
		return "", fmt.Errorf("%w: %q is in dnsd's config file", ErrJoinConflict, have.Name)
	case SameMember(have.MemberInfo, j.o.Member):
		if have.State != "draining" {
			return "kept", nil
		}
		// A leave of this mirror that was cut short before GROUP-EXIT.
		return "undrained", j.call(ctx, t, "undrain", func(ctx context.Context) error {
			_, err := t.api.Undrain(ctx, j.o.Group, j.o.Member.Name)
			return err
		})
	case !have.Joined:
		return "", fmt.Errorf("%w: %q was added by an operator with other settings", ErrJoinConflict, have.Name)
	}
	// This mirror before a restart with other settings: replace it.
	if err := j.call(ctx, t, "remove", func(ctx context.Context) error {
		_, err := t.api.RemoveMember(ctx, j.o.Group, j.o.Member.Name)
		return err
	}); err != nil {
		return "", err
	}
	return "replaced", j.call(ctx, t, "add", func(ctx context.Context) error {
		_, err := t.api.AddMember(ctx, j.o.Group, j.o.Member)
		return err
	})
}

// call runs one request to t bounded by the timeout and counts it.
func (j *Joiner) call(ctx context.Context, t *joinTarget, op string, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, j.o.Timeout)
	defer cancel()
	err := f(ctx)
	result := "ok"
	if err != nil {
		result = "error"
	}
	j.requests.WithLabelValues(t.label, op, result).Inc()
	if err != nil {
		return fmt.Errorf("mirror: join: %s: %w", op, err)
	}
	return nil
}

// Leave takes the mirror out of the group gracefully: it drains it on
// every dnsd (a dnsd that does not have it has nothing to drain), keeps
// the mirror serving for the leave wait so that the answers resolvers
// cached run out, then sends GROUP-EXIT to every dnsd. ctx done cuts the
// wait short (a second signal); the GROUP-EXIT is still sent, on a fresh
// bounded context. When no dnsd took the drain the wait is skipped: dnsd
// keeps answering with the mirror, waiting would not change that. Leave
// returns the errors of the requests that failed, after the leave is
// through.
func (j *Joiner) Leave(ctx context.Context) error {
	j.setState(JoinDraining)
	start := time.Now()
	drained, derr := j.each(ctx, "drain", func(ctx context.Context, t *joinTarget) error {
		_, err := t.api.Drain(ctx, j.o.Group, j.o.Member.Name)
		return err
	})
	if drained > 0 {
		wait, from := j.leaveWait(ctx)
		j.wait.Set(wait.Seconds())
		j.setState(JoinWaiting)
		j.log.Info("leaving the group: drained, serving while cached answers run out",
			"member", j.o.Member.Name, "dnsd", drained, "wait_seconds", wait.Seconds(), "wait_from", from)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			j.log.Warn("leaving the group: the wait was cut short", "member", j.o.Member.Name, "waited_seconds", time.Since(start).Seconds())
		case <-timer.C:
		}
	} else {
		j.log.Warn("leaving the group: no dnsd took the drain, not waiting", "member", j.o.Member.Name)
	}
	j.setState(JoinLeaving)
	exited, eerr := j.each(context.WithoutCancel(ctx), "exit", func(ctx context.Context, t *joinTarget) error {
		_, err := t.api.RemoveMember(ctx, j.o.Group, j.o.Member.Name)
		return err
	})
	j.setState(JoinLeft)
	j.log.Info("left the group", "member", j.o.Member.Name, "dnsd", exited, "seconds", time.Since(start).Seconds())
	return errors.Join(derr, eerr)
}

// each runs f on every dnsd at once, each up to leaveAttempts times with
// backoff; a dnsd that answers 404 (no such member) counts as done. It
// returns how many dnsd it worked on and the errors of the others.
func (j *Joiner) each(ctx context.Context, op string, f func(context.Context, *joinTarget) error) (int, error) {
	errs := make([]error, len(j.targets))
	var wg sync.WaitGroup
	for i, t := range j.targets {
		wg.Go(func() {
			backoff := j.o.Backoff
			for attempt := 1; ; attempt++ {
				err := j.call(ctx, t, op, func(ctx context.Context) error { return f(ctx, t) })
				var se *api.StatusError
				if err == nil || errors.As(err, &se) && se.Code == http.StatusNotFound {
					errs[i] = nil
					return
				}
				errs[i] = err
				if attempt == leaveAttempts || ctx.Err() != nil {
					return
				}
				timer := time.NewTimer(j.jittered(backoff))
				select {
				case <-ctx.Done():
					timer.Stop()
					return
				case <-timer.C:
				}
				backoff = min(2*backoff, j.o.MaxBackoff)
			}
		})
	}
	wg.Wait()
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// leaveWait returns how long to serve after the drain, and where that
// came from: join.leave_wait, the group's ttl.max (from the latest view,
// or one asked for now), else DefaultLeaveWait; at most MaxLeaveWait.
func (j *Joiner) leaveWait(ctx context.Context) (time.Duration, string) {
	if j.o.LeaveWait > 0 {
		return j.o.LeaveWait, "leave_wait"
	}
	var v *api.GroupView
	if j.o.View != nil {
		v = j.o.View()
	}
	for _, t := range j.targets {
		if v != nil {
			break
		}
		var got api.GroupView
		if j.call(ctx, t, "view", func(ctx context.Context) (err error) {
			got, err = t.api.Group(ctx, j.o.Group)
			return err
		}) == nil {
			v = &got
		}
	}
	if v == nil {
		return DefaultLeaveWait, "default"
	}
	return min(time.Duration(v.TTL.Max)*time.Second, MaxLeaveWait), "ttl.max"
}

// SameMember reports whether the member a dnsd has (have) is the one that
// want describes, as far as a mirror says: name, host name (case and a
// final dot aside), the set of addresses, capacity, bandwidth, location
// and probe. Weight, which a mirror does not set, is not compared.
func SameMember(have, want api.MemberInfo) bool {
	return have.Name == want.Name &&
		sameHost(have.Host, want.Host) &&
		sameAddrs(have.Addresses, want.Addresses) &&
		have.Capacity == want.Capacity && have.Bandwidth == want.Bandwidth &&
		samePtr(have.Location.Lat, want.Location.Lat) && samePtr(have.Location.Lon, want.Location.Lon) &&
		strings.EqualFold(have.Location.Country, want.Location.Country) &&
		strings.EqualFold(have.Location.Continent, want.Location.Continent) &&
		have.Probe == want.Probe
}

func samePtr(a, b *float64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// sameAddrs compares two lists of IP addresses as sets; an address that
// does not parse is compared as written.
func sameAddrs(a, b []string) bool {
	norm := func(l []string) []string {
		out := make([]string, 0, len(l))
		for _, s := range l {
			if ip, err := netip.ParseAddr(s); err == nil {
				s = ip.Unmap().String()
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

// JoinStatus describes the mirror's own membership (join: in mirror.yaml).
type JoinStatus struct {
	// State is one of JoinJoining … JoinLeft.
	State string `json:"state"`
	// Joined is how many of the DNSD have the member.
	Joined int `json:"joined"`
	DNSD   int `json:"dnsd"`
}
