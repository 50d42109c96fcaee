package content

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the Handler's rate limit.
const (
	// DefaultRate is the requests per second a client may make, sustained.
	DefaultRate = 1.0
	// DefaultBurst is how many it may make at once.
	DefaultBurst = 10
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

// allow takes a token of the client at remoteAddr (HOST:PORT); when there
// is none it says how long until there is.
func (l *limiter) allow(remoteAddr string) (time.Duration, bool) {
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
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / l.o.Rate * float64(time.Second)), false
	}
	b.tokens--
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
