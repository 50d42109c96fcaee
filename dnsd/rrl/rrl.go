// Package rrl is dnsd's response rate limiting, after BIND's and Knot's
// RRL: responses to one client prefix of one kind for one name are
// counted in a token bucket; once it is empty, responses are dropped, and
// every Slip-th one goes out truncated (TC set, no records) so that a real
// client behind a spoofed-at prefix retries over TCP, which is never
// limited. The state is a fixed-size table indexed by a keyed hash, so
// attacker-chosen prefixes can not grow it or aim collisions; a collision
// overwrites a bucket with a full one, which only ever limits less. It is
// pure: the time comes in as an argument.
package rrl

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"sync"
	"time"
)

// Defaults of Config, safe for a server on the internet: a real resolver
// asks one name of one zone far less than 20 times a second per /24.
const (
	DefaultRate       = 20
	DefaultWindow     = 5 * time.Second
	DefaultSlip       = 2
	DefaultIPv4Prefix = 24
	DefaultIPv6Prefix = 56
	DefaultTableSize  = 1 << 16
	stripes           = 64
)

// ErrConfig is returned by New for a Config that makes no sense.
var ErrConfig = errors.New("rrl: invalid config")

// Config tunes a Limiter. Zero values take the defaults.
type Config struct {
	// Rate is the responses per second one bucket allows (default 20).
	Rate float64
	// Window is how long a bucket may save up: it holds at most
	// Rate × Window responses (default 5s).
	Window time.Duration
	// Slip: every Slip-th limited response is sent truncated instead of
	// dropped (default 2; 1 slips all, -1 none).
	Slip int
	// IPv4Prefix and IPv6Prefix are the client prefixes that share a
	// bucket (default /24 and /56).
	IPv4Prefix, IPv6Prefix int
	// Exempt are clients that are never limited.
	Exempt []netip.Prefix
	// LogOnly decides as usual but sends everything: for tuning.
	LogOnly bool
	// TableSize is the number of buckets (default 65,536, about 2 MiB).
	TableSize int
}

// WithDefaults returns c with its zero values defaulted, or an error.
func (c Config) WithDefaults() (Config, error) {
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Slip == 0 {
		c.Slip = DefaultSlip
	}
	if c.IPv4Prefix == 0 {
		c.IPv4Prefix = DefaultIPv4Prefix
	}
	if c.IPv6Prefix == 0 {
		c.IPv6Prefix = DefaultIPv6Prefix
	}
	if c.TableSize == 0 {
		c.TableSize = DefaultTableSize
	}
	var errs []error
	switch {
	case !(c.Rate > 0) || c.Rate > 1e6:
		errs = append(errs, fmt.Errorf("rate %g: want 0 < rate <= 1000000 responses/s", c.Rate))
	}
	if c.Window < 0 || c.Window > time.Minute || c.Rate*c.Window.Seconds() < 1 {
		errs = append(errs, fmt.Errorf("window %s: want up to 1m and rate × window >= 1", c.Window))
	}
	if c.Slip < -1 || c.Slip > 10 {
		errs = append(errs, fmt.Errorf("slip %d: want 1..10, or -1 for none", c.Slip))
	}
	if c.IPv4Prefix < 8 || c.IPv4Prefix > 32 {
		errs = append(errs, fmt.Errorf("ipv4_prefix %d: want 8..32", c.IPv4Prefix))
	}
	if c.IPv6Prefix < 16 || c.IPv6Prefix > 128 {
		errs = append(errs, fmt.Errorf("ipv6_prefix %d: want 16..128", c.IPv6Prefix))
	}
	if c.TableSize < stripes || c.TableSize > 1<<24 {
		errs = append(errs, fmt.Errorf("table_size %d: want %d..%d", c.TableSize, stripes, 1<<24))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return c, nil
}

// Kind is what a response is, for its bucket.
type Kind uint8

// The kinds of responses. Positive answers and NODATA are counted per
// name, NXDOMAIN per zone, referrals per delegation, errors per client.
const (
	Answer Kind = iota
	NoData
	NXDomain
	Referral
	Error
	numKinds
)

var kindNames = [...]string{Answer: "answer", NoData: "nodata", NXDomain: "nxdomain", Referral: "referral", Error: "error"}

// String returns the kind's name, a metric label value.
func (k Kind) String() string { return kindNames[k] }

// Kinds returns every kind, for pre-declaring metric label values.
func Kinds() []Kind { return []Kind{Answer, NoData, NXDomain, Referral, Error} }

// Action is what to do with one response.
type Action uint8

// The actions.
const (
	// Send the response as it is.
	Send Action = iota
	// Drop it: send nothing.
	Drop
	// Slip: send it truncated (TC, no records).
	Slip
)

// Limiter decides, response by response. It is safe for concurrent use.
type Limiter struct {
	cfg   Config
	seed  maphash.Seed
	burst float64
	mask  uint64
	locks [stripes]sync.Mutex
	table []bucket
}

// bucket is one token bucket; key 0 is an empty slot.
type bucket struct {
	key    uint64
	tokens float64
	last   int64 // unix nanoseconds of the last refill
	slip   uint32
}

// New returns a Limiter for c (defaulted and checked).
func New(c Config) (*Limiter, error) {
	c, err := c.WithDefaults()
	if err != nil {
		return nil, err
	}
	size := 1
	for size < c.TableSize {
		size <<= 1
	}
	return &Limiter{cfg: c, seed: maphash.MakeSeed(), burst: c.Rate * c.Window.Seconds(),
		mask: uint64(size - 1), table: make([]bucket, size)}, nil
}

// Config returns the Limiter's config, defaults filled in.
func (l *Limiter) Config() Config { return l.cfg }

// Decide counts one response of kind for name (lower case; "" for
// kinds counted per client) to client at now, and says what to do with
// it. In log-only mode the action is what it would be, and the caller
// sends anyway.
func (l *Limiter) Decide(client netip.Addr, kind Kind, name string, now time.Time) Action {
	client = client.Unmap()
	bits := l.cfg.IPv4Prefix
	if client.Is6() {
		bits = l.cfg.IPv6Prefix
	}
	p, err := client.Prefix(bits)
	if err != nil {
		return Send
	}
	for _, e := range l.cfg.Exempt {
		if e.Contains(client) {
			return Send
		}
	}
	var h maphash.Hash
	h.SetSeed(l.seed)
	a := p.Addr().As16()
	h.Write(a[:])
	h.WriteByte(byte(kind))
	if kind != Error {
		for i := range len(name) { // lower case without allocating (0x20 mixes case)
			c := name[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			h.WriteByte(c)
		}
	}
	key := h.Sum64() | 1 // never 0, the empty slot
	i := key & l.mask
	mu := &l.locks[i%stripes]
	mu.Lock()
	defer mu.Unlock()
	b := &l.table[i]
	t := now.UnixNano()
	if b.key != key {
		*b = bucket{key: key, tokens: l.burst, last: t}
	} else if dt := t - b.last; dt > 0 {
		b.tokens = min(l.burst, b.tokens+float64(dt)/1e9*l.cfg.Rate)
		b.last = t
	}
	if b.tokens >= 1 {
		b.tokens--
		return Send
	}
	if l.cfg.Slip > 0 {
		b.slip++
		if b.slip%uint32(l.cfg.Slip) == 0 {
			return Slip
		}
	}
	return Drop
}
