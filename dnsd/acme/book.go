package acme

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/zones"
)

// Store keeps the live challenges: Memory, or the NS set's acme/ family.
type Store interface {
	// Put keeps c (replacing the one of the same Key) until c.Expires.
	Put(c Challenge) error
	// Delete drops the challenge of c's Key, if any.
	Delete(c Challenge) error
	// List returns every challenge kept, expired ones perhaps included.
	List() []Challenge
}

// Options configure a Book.
type Options struct {
	// Set returns the configuration in service (groups with their
	// run-time members, zones); required.
	Set func() *zones.Set
	// Store keeps the challenges; nil is a new Memory.
	Store Store
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Registry gets the book's metrics; nil keeps them private.
	Registry prometheus.Registerer
}

// Book is the writer of the live challenges (the admin API's) over their
// Store, which the DNS answers read through Served. It is safe for
// concurrent use.
type Book struct {
	set   func() *zones.Set
	store Store
	now   func() time.Time

	mu      sync.Mutex // serializes writes: the count of live values, then the Put
	buckets map[string]*bucket

	results *prometheus.CounterVec
}

// New returns a Book with its metrics registered.
func New(o Options) (*Book, error) {
	b := &Book{set: o.Set, store: o.Store, now: o.Now, buckets: map[string]*bucket{}}
	if b.store == nil {
		b.store = NewMemory()
	}
	if b.now == nil {
		b.now = time.Now
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	b.results = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "acme_challenges_total",
		Help: "ACME DNS-01 challenge requests of the admin API, by result: published, removed, forbidden (a name the member is not entitled to), invalid (a malformed name or value), limited (rate or live values).",
	}, []string{"result"})
	live := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "acme_live_challenges",
		Help: "ACME DNS-01 challenge values served now.",
	}, func() float64 { return float64(len(b.List())) })
	for _, c := range []prometheus.Collector{b.results, live} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("acme: register metrics: %w", err)
		}
	}
	for _, r := range Results {
		b.results.WithLabelValues(r)
	}
	return b, nil
}

// Publish serves "_acme-challenge.name TXT value" for member of group
// until ChallengeTTL from now (publishing it again extends it) and
// returns it. The checks, in order: the member's rate (ErrLimited), the
// name and value (ErrInvalid), the entitlement (ErrForbidden), the
// member's live values (ErrLimited); a refused request changes nothing.
func (b *Book) Publish(group, member, name, value string) (Challenge, error) {
	c, err := b.check(group, member, name, value)
	if err != nil {
		return Challenge{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	n, same := 0, false
	for _, o := range b.store.List() {
		if o.Group == c.Group && o.Member == c.Member && o.Expires.After(now) {
			n++
			same = same || o.Key() == c.Key()
		}
	}
	if !same && n >= MaxValuesPerMember {
		b.results.WithLabelValues("limited").Inc()
		return Challenge{}, fmt.Errorf("%w: member %s has %d live values, at most %d", ErrLimited, member, n, MaxValuesPerMember)
	}
	c.Expires = now.Add(ChallengeTTL)
	if err := b.store.Put(c); err != nil {
		return Challenge{}, err
	}
	b.results.WithLabelValues("published").Inc()
	return c, nil
}

// Remove stops serving member's value for name; it reports whether there
// was one. It is checked like Publish (but for the live values).
func (b *Book) Remove(group, member, name, value string) (bool, error) {
	c, err := b.check(group, member, name, value)
	if err != nil {
		return false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.ContainsFunc(b.store.List(), func(o Challenge) bool { return o.Key() == c.Key() }) {
		return false, nil
	}
	if err := b.store.Delete(c); err != nil {
		return false, err
	}
	b.results.WithLabelValues("removed").Inc()
	return true, nil
}

// check is what Publish and Remove check first: the rate, the request,
// the entitlement; it counts a refusal.
func (b *Book) check(group, member, name, value string) (Challenge, error) {
	set := b.set()
	refuse := func(result string, err error) (Challenge, error) {
		b.results.WithLabelValues(result).Inc()
		return Challenge{}, err
	}
	if set == nil || set.Group(group) == nil || !isMember(set, group, member) {
		return refuse("forbidden", fmt.Errorf("%w: group %q has no member %q", ErrForbidden, group, member))
	}
	if !b.allow(set.Group(group).Name+"/"+member, b.now()) {
		return refuse("limited", fmt.Errorf("%w: member %s: more than %d requests at once, one more every %s", ErrLimited, member, RequestBurst, RequestEvery))
	}
	cname, err := Validate(name, value)
	if err != nil {
		return refuse("invalid", err)
	}
	if err := Entitled(set, group, member, cname); err != nil {
		return refuse("forbidden", err)
	}
	return Challenge{Group: set.Group(group).Name, Member: member, Name: cname, Value: value}, nil
}

func isMember(set *zones.Set, group, member string) bool {
	return slices.ContainsFunc(set.Group(group).Members, func(m zones.MemberConfig) bool { return m.Name == member })
}

// live returns the challenges to serve at now: not expired, still
// entitled in set.
func live(all []Challenge, set *zones.Set, now time.Time) []Challenge {
	out := all[:0:0]
	for _, c := range all {
		if c.Expires.After(now) && Entitled(set, c.Group, c.Member, c.Name) == nil {
			out = append(out, c)
		}
	}
	return out
}

// List returns the live challenges, by name, member and value.
func (b *Book) List() []Challenge {
	out := live(b.store.List(), b.set(), b.now())
	slices.SortFunc(out, func(x, y Challenge) int {
		if x.Name != y.Name {
			return compare(x.Name, y.Name)
		}
		return compare(x.Key(), y.Key())
	})
	return out
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Served is what the DNS answers read of a Store (dnsd.Challenges): it
// writes nothing and needs no Book, so that the DNS server can be built
// before the member registry that a Book checks against. It serves the
// values that have not expired; that they are still entitled is kept by
// Forget (a member that leaves) and the Book's Sweep (anything else).
type Served struct {
	// Store is the Book's.
	Store Store
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// TXT returns the values to answer a TXT query for qname with, sorted
// and distinct; none when qname is not a challenge name or has no live
// value.
func (s Served) TXT(qname string) []string {
	name := ChallengeName(qname)
	if name == "" {
		return nil
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	at := now()
	var out []string
	for _, c := range s.Store.List() {
		if c.Name == name && c.Expires.After(at) {
			out = append(out, c.Value)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Forget deletes every challenge of member of group from s: the member
// left the group (the member registry's watcher is told so on every node
// of an NS set, whoever removed it). It returns the first error.
func Forget(s Store, group, member string) error {
	var first error
	for _, c := range s.List() {
		if c.Group == dns.CanonicalName(group) && c.Member == member {
			if err := s.Delete(c); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// Sweep drops from the Store what is no longer served (expired, or of a
// member no longer entitled) and forgets the rate of members that are
// gone; it returns how many challenges it dropped.
func (b *Book) Sweep() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	set, now := b.set(), b.now()
	n := 0
	for _, c := range b.store.List() {
		if !c.Expires.After(now) || Entitled(set, c.Group, c.Member, c.Name) != nil {
			if b.store.Delete(c) == nil {
				n++
			}
		}
	}
	for k, bk := range b.buckets {
		if bk.full(now) {
			delete(b.buckets, k)
		}
	}
	return n
}

// Run sweeps every SweepInterval until ctx is done.
func (b *Book) Run(ctx context.Context) error {
	t := time.NewTicker(SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			b.Sweep()
		}
	}
}
