package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// stallServer is a TCP listener that accepts connections and never
// finishes an answer, the way a wedged mirror does; how it stalls is its
// mode. It counts the connections it holds (until the peer closes them).
type stallServer struct {
	ln   net.Listener
	mode string

	mu             sync.Mutex
	open           int // connections held now
	conns          map[net.Conn]struct{}
	closed         bool
	wg             sync.WaitGroup
	windowMax      int // the most open at once since resetWindow
	windowAccepted int // accepted since resetWindow
}

// Modes of a stallServer.
const (
	stallSilent  = "accepts and never answers"
	stallHeaders = "sends the headers, then nothing"
	stallTrickle = "trickles the body, a byte every 50 ms"
)

func newStallServer(t *testing.T, mode string) *stallServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stallServer{ln: ln, mode: mode, conns: map[net.Conn]struct{}{}}
	s.wg.Go(s.accept)
	t.Cleanup(s.close)
	return s
}

func (s *stallServer) url() string { return "http://" + s.ln.Addr().String() + "/v1/load" }

func (s *stallServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.windowAccepted++
		s.open++
		s.windowMax = max(s.windowMax, s.open)
		s.mu.Unlock()
		s.wg.Go(func() { s.hold(c) })
	}
}

// hold stalls c as the mode says until the peer closes it.
func (s *stallServer) hold(c net.Conn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.open--
		s.mu.Unlock()
	}()
	gone := make(chan struct{})
	r := bufio.NewReader(c)
	if s.mode != stallSilent {
		// Read the request's head, then answer it in part.
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{"); err != nil {
			return
		}
	}
	go func() { // the peer closing is a read error
		_, _ = r.WriteTo(discard{})
		close(gone)
	}()
	if s.mode != stallTrickle {
		<-gone
		return
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-gone:
			return
		case <-tick.C:
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// resetWindow starts a new window of counts; window returns them: the
// most connections open at once and those accepted since.
func (s *stallServer) resetWindow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windowMax, s.windowAccepted = s.open, 0
}

func (s *stallServer) window() (maxOpen, accepted, open int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.windowMax, s.windowAccepted, s.open
}

func (s *stallServer) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// TestFaultMirrorStalls: members whose probe target accepts connections
// and never finishes an answer (three ways: silent, headers only, a body
// that trickles). The probe timeout takes each out of dnsd's answers, and
// over ten probe intervals after that dnsd's goroutines and the
// connections each stall server holds stay bounded: one probe in flight
// per member, each ended by its timeout.
func TestFaultMirrorStalls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	healthy := faultMember{name: "sin1", ip: "127.0.42.1"}
	d := startDNSD(t, true, "-config", faultDNSD(t, dir, 8, "", healthy))
	modes := []string{stallSilent, stallHeaders, stallTrickle}
	var servers []*stallServer
	var stalled []faultMember
	for i, mode := range modes {
		servers = append(servers, newStallServer(t, mode))
		stalled = append(stalled, faultMember{name: fmt.Sprintf("stall%d", i+1), ip: fmt.Sprintf("127.0.42.%d", 11+i), probe: servers[i].url()})
	}

	// dnsd's goroutines before: the most of a few samples.
	var base float64
	for range 5 {
		g, err := goroutines(d.Admin)
		if err != nil {
			t.Fatal(err)
		}
		base = max(base, g)
	}

	start := time.Now()
	log := newAnswerLog(start)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	polled := pollAnswers(ctx, d.Addr, log)
	added := make([]time.Duration, len(stalled))
	for i, m := range stalled {
		faultAdd(t, d, m)
		added[i] = time.Since(start)
	}
	// The bound from the add: the first probe within one interval (and a
	// jitter), the fall-th failing one fall − 1 intervals later, ending
	// at its timeout.
	h := faultHealth
	bound := time.Duration(h.Fall)*h.Interval + h.Jitter + h.Timeout
	probetest.Until(t, bound+10*time.Second, func() string {
		st, err := memberStates(d.Admin)
		if err != nil {
			return err.Error()
		}
		now := time.Since(start)
		for _, m := range stalled {
			if st[m.name] != "down" {
				return fmt.Sprintf("%s is %q", m.name, st[m.name])
			}
			if last, _ := log.lastNamed(m.ip); now-last < 2*h.Interval {
				return fmt.Sprintf("%s was named %v ago", m.name, (now - last).Round(time.Millisecond))
			}
		}
		return ""
	})

	// Ten probe intervals with every stalled member down: dnsd keeps
	// probing them, one probe in flight each.
	for _, s := range servers {
		s.resetWindow()
	}
	windowStart := time.Now()
	window := 10 * h.Interval
	var samples []float64
	tick := time.NewTicker(100 * time.Millisecond)
	for time.Since(windowStart) < window {
		if g, err := goroutines(d.Admin); err == nil {
			samples = append(samples, g)
		}
		<-tick.C
	}
	tick.Stop()
	elapsed := time.Since(windowStart)
	cancel()
	<-polled

	for i, m := range stalled {
		last, _ := log.lastNamed(m.ip)
		took := last - added[i]
		t.Logf("%s (%s): the last answer naming it was asked %v after its add (bound %v: fall %d × interval %v + jitter %v + timeout %v)",
			m.name, modes[i], took.Round(time.Millisecond), bound, h.Fall, h.Interval, h.Jitter, h.Timeout)
		if took > bound+h.Interval {
			t.Errorf("%s (%s) was in dnsd's answers %v after its add, want within %v (+ %v for a busy host)", m.name, modes[i], took, bound, h.Interval)
		}
	}
	// One probe per interval and member at most, each on a connection that
	// the timeout closes: at most two open at once (a closing one and the
	// next), and no more accepted than intervals went by (and a slot).
	probes := int(elapsed/h.Interval) + 2
	for i, s := range servers {
		maxOpen, accepted, open := s.window()
		t.Logf("%s: over %v (%d probe intervals) %d connections accepted, at most %d open at once, %d open at the end",
			modes[i], elapsed.Round(time.Millisecond), int(elapsed/h.Interval), accepted, maxOpen, open)
		if maxOpen > 2 {
			t.Errorf("%s: %d probe connections open at once, want at most 2", modes[i], maxOpen)
		}
		if accepted > probes {
			t.Errorf("%s: %d probe connections in %v, want at most %d (one an interval)", modes[i], accepted, elapsed, probes)
		}
		if accepted < 2 {
			t.Errorf("%s: only %d probes in %v: dnsd stopped probing a down member", modes[i], accepted, elapsed)
		}
	}
	// dnsd's goroutines: a probe in flight costs a few (the probe, the
	// connection's reader and writer); that many per stalled member over
	// the baseline, and none gained from the first half of the window to
	// the second.
	if len(samples) < 4 {
		t.Fatalf("only %d goroutine samples", len(samples))
	}
	half := len(samples) / 2
	firstMax, secondMin, most := slices.Max(samples[:half]), slices.Min(samples[half:]), slices.Max(samples)
	limit := base + float64(8*len(stalled))
	t.Logf("dnsd goroutines: %.0f before the stalled members; in the window %.0f..%.0f (at most %.0f in its first half, at least %.0f in its second; limit %.0f)",
		base, slices.Min(samples), most, firstMax, secondMin, limit)
	if most > limit {
		t.Errorf("dnsd has %.0f goroutines with %d stalled members, want at most %.0f (%.0f before them + 8 each)", most, len(stalled), limit, base)
	}
	// Probes that piled up would raise the floor: the second half's least
	// is above the first half's most.
	if secondMin > firstMax {
		t.Errorf("dnsd's goroutines grew: at least %.0f in the second half of the window, at most %.0f in the first: stalled probes pile up", secondMin, firstMax)
	}
}
