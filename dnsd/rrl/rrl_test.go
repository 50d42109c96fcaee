package rrl

import (
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// count sends n responses at now and counts the actions.
func count(l *Limiter, client string, kind Kind, name string, n int, now time.Time) (send, drop, slip int) {
	a := netip.MustParseAddr(client)
	for range n {
		switch l.Decide(a, kind, name, now) {
		case Send:
			send++
		case Drop:
			drop++
		case Slip:
			slip++
		}
	}
	return
}

func TestLimiter(t *testing.T) {
	cfg := Config{Rate: 10, Window: 2 * time.Second, Slip: 2, Exempt: []netip.Prefix{netip.MustParsePrefix("192.0.2.128/25")}}
	tests := []struct {
		name             string
		run              func(l *Limiter) (int, int, int)
		send, drop, slip int
	}{
		{"a burst of 100: rate × window sent, every 2nd limited one slips", func(l *Limiter) (int, int, int) {
			return count(l, "198.51.100.7", Answer, "www.example.org.", 100, t0)
		}, 20, 40, 40},
		{"one second later: rate more", func(l *Limiter) (int, int, int) {
			count(l, "198.51.100.7", Answer, "www.example.org.", 100, t0)
			return count(l, "198.51.100.7", Answer, "www.example.org.", 30, t0.Add(time.Second))
		}, 10, 10, 10},
		{"the bucket saves up no more than the window", func(l *Limiter) (int, int, int) {
			count(l, "198.51.100.7", Answer, "www.example.org.", 100, t0)
			return count(l, "198.51.100.7", Answer, "www.example.org.", 30, t0.Add(time.Hour))
		}, 20, 5, 5},
		{"the same /24 shares a bucket", func(l *Limiter) (int, int, int) {
			count(l, "198.51.100.7", Answer, "www.example.org.", 20, t0)
			return count(l, "198.51.100.200", Answer, "www.example.org.", 10, t0)
		}, 0, 5, 5},
		{"another /24 has its own", func(l *Limiter) (int, int, int) {
			count(l, "198.51.100.7", Answer, "www.example.org.", 100, t0)
			return count(l, "198.51.101.7", Answer, "www.example.org.", 20, t0)
		}, 20, 0, 0},
		{"the same /56 shares a bucket", func(l *Limiter) (int, int, int) {
			count(l, "2001:db8:0:1::1", Answer, "www.example.org.", 20, t0)
			return count(l, "2001:db8:0:ff::2", Answer, "www.example.org.", 2, t0)
		}, 0, 1, 1},
		{"another name has its own", func(l *Limiter) (int, int, int) {
			count(l, "198.51.100.7", Answer, "www.example.org.", 100, t0)
			return count(l, "198.51.100.7", Answer, "WWW2.example.org.", 20, t0)
		}, 20, 0, 0},
		{"names are compared without case", func(l *Limiter) (int, int, int) {
			count(l, "198.51.100.7", Answer, "www.example.org.", 20, t0)
			return count(l, "198.51.100.7", Answer, "WwW.Example.ORG.", 2, t0)
		}, 0, 1, 1},
		{"another kind has its own", func(l *Limiter) (int, int, int) {
			count(l, "198.51.100.7", Answer, "example.org.", 100, t0)
			return count(l, "198.51.100.7", NXDomain, "example.org.", 20, t0)
		}, 20, 0, 0},
		{"errors are per client, whatever the name", func(l *Limiter) (int, int, int) {
			count(l, "198.51.100.7", Error, "a.example.org.", 20, t0)
			return count(l, "198.51.100.7", Error, "b.example.org.", 2, t0)
		}, 0, 1, 1},
		{"exempt clients are never limited", func(l *Limiter) (int, int, int) {
			return count(l, "192.0.2.200", Answer, "www.example.org.", 1000, t0)
		}, 1000, 0, 0},
		{"IPv4-mapped is IPv4", func(l *Limiter) (int, int, int) {
			count(l, "198.51.100.7", Answer, "www.example.org.", 20, t0)
			return count(l, "::ffff:198.51.100.9", Answer, "www.example.org.", 2, t0)
		}, 0, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			send, drop, slip := tt.run(l)
			if send != tt.send || drop != tt.drop || slip != tt.slip {
				t.Errorf("sent %d, dropped %d, slipped %d; want %d, %d, %d", send, drop, slip, tt.send, tt.drop, tt.slip)
			}
		})
	}
}

func TestSlipSettings(t *testing.T) {
	for _, tt := range []struct {
		name               string
		every              int
		wantDrop, wantSlip int
	}{
		{"slip 1: every limited response slips", 1, 0, 10},
		{"slip 3: every 3rd", 3, 7, 3},
		{"slip -1: none", -1, 10, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := New(Config{Rate: 1, Window: time.Second, Slip: tt.every})
			if err != nil {
				t.Fatal(err)
			}
			_, drop, slip := count(l, "198.51.100.7", Answer, "x.", 11, t0)
			if drop != tt.wantDrop || slip != tt.wantSlip {
				t.Errorf("dropped %d, slipped %d; want %d, %d", drop, slip, tt.wantDrop, tt.wantSlip)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative rate", Config{Rate: -1}, "rate -1"},
		{"window too short for the rate", Config{Rate: 1, Window: time.Millisecond}, "rate × window >= 1"},
		{"slip 11", Config{Slip: 11}, "slip 11"},
		{"ipv4 prefix 33", Config{IPv4Prefix: 33}, "ipv4_prefix 33"},
		{"ipv6 prefix 8", Config{IPv6Prefix: 8}, "ipv6_prefix 8"},
		{"table too small", Config{TableSize: 8}, "table_size 8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want ErrConfig with %q", err, tt.want)
			}
		})
	}
}

// TestTableIsFixed: a flood of distinct prefixes never grows the table,
// and a client it evicted starts again with a full bucket (limits less,
// never more).
func TestTableIsFixed(t *testing.T) {
	l, err := New(Config{Rate: 1, Window: time.Second, TableSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), 0})
		l.Decide(a, Answer, "x.", t0)
	}
	if len(l.table) != 1024 {
		t.Errorf("table has %d buckets after 100,000 prefixes, want 1024", len(l.table))
	}
}

// TestConcurrent runs Decide from many goroutines (for -race): the total
// sent to one bucket is still the burst.
func TestConcurrent(t *testing.T) {
	l, err := New(Config{Rate: 50, Window: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sent := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			s, _, _ := count(l, "198.51.100.7", Answer, "www.example.org.", 500, t0)
			mu.Lock()
			sent += s
			mu.Unlock()
		})
	}
	wg.Wait()
	if sent != 100 {
		t.Errorf("%d sent from one bucket, want its burst 100", sent)
	}
}

func BenchmarkDecide(b *testing.B) {
	l, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	a := netip.MustParseAddr("198.51.100.7")
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		l.Decide(a, Answer, "www.example.org.", now)
	}
}
