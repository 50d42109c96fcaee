package content

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the Handler's rate limit. A change set costs a token and a
// full index FullCost tokens; a 304 costs none. So a client may ask for
// the changes twice a second, sustained (a sibling's poll and its
// refreshes on a miss, each at most once a second), and for the full
// index, the one expensive answer, once every 2.5 s.
const (
	// DefaultRate is the tokens per second a client gets, sustained.
	DefaultRate = 2.0
	// DefaultBurst is how many tokens it may spend at once.
	DefaultBurst = 20
	// FullCost is the tokens a full index costs.
	FullCost = 5
	// DefaultMaxClients is how many clients' buckets are kept.
	DefaultMaxClients = 1024
)

// LimitOptions configure the per-client token bucket; a zero field takes
// its default.
type LimitOptions struct {
	Rate       float64          // tokens per second (DefaultRate)
	Burst      int              // the bucket's size (DefaultBurst)
	MaxClients int              // buckets kept (DefaultMaxClients)
	Clock      func() time.Time // default time.Now
}

// limiter is a token bucket per client: an IPv4 address or an IPv6 /64.
// When it holds MaxClients buckets it forgets the full ones (clients
// idle long enough to have their burst back), and all of them if none
// is full: a flood of addresses costs bounded memory, and at worst gives
// each a new burst.
type limiter struct {
	o       LimitOptions
	mu      sync.Mutex
	buckets map[netip.Prefix]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(o LimitOptions) *limiter {
	if o.Rate <= 0 {
		o.Rate = DefaultRate
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &limiter{o: o, buckets: map[netip.Prefix]*bucket{}}
}

// allow takes cost tokens of the client at remoteAddr (HOST:PORT); when
// there are not as many it says how long until there are.
func (l *limiter) allow(remoteAddr string, cost float64) (time.Duration, bool) {
	key := clientKey(remoteAddr)
	now := l.o.Clock()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		l.makeRoom(now)
		b = &bucket{tokens: float64(l.o.Burst), at: now}
		l.buckets[key] = b
	}
	b.refill(now, l.o)
	if b.tokens < cost {
		return time.Duration((cost - b.tokens) / l.o.Rate * float64(time.Second)), false
	}
	b.tokens -= cost
	return 0, true
}

func (b *bucket) refill(now time.Time, o LimitOptions) {
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = min(float64(o.Burst), b.tokens+dt*o.Rate)
	}
	b.at = now
}

// makeRoom forgets buckets when there are MaxClients (l.mu held).
func (l *limiter) makeRoom(now time.Time) {
	if len(l.buckets) < l.o.MaxClients {
		return
	}
	for k, b := range l.buckets {
		if b.refill(now, l.o); b.tokens >= float64(l.o.Burst) {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= l.o.MaxClients {
		clear(l.buckets)
	}
}

// clientKey is the client's address, an IPv6 one as its /64; an address
// that does not parse is one client of its own (the zero prefix).
func clientKey(remoteAddr string) netip.Prefix {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	a = a.Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}
