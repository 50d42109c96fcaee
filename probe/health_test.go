package probe

import (
	"strings"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	// Results as a string: '+' success, '-' failure, one per second.
	tests := []struct {
		name    string
		cfg     HealthConfig
		results string
		states  string // state after each result: u unknown, U up, D down
		events  []string
	}{
		{"new member is unknown", HealthConfig{}, "+", "u", nil},
		{"rise 2 to up", HealthConfig{}, "++", "uU", []string{"unknown→up"}},
		{"one failure is not down", HealthConfig{}, "-", "u", nil},
		{"fall 3 from unknown", HealthConfig{}, "---", "uuD", []string{"unknown→down"}},
		{"fall 3 from up", HealthConfig{}, "++---", "uUUUD", []string{"unknown→up", "up→down"}},
		{"failures reset by a success", HealthConfig{}, "++--+--+", "uUUUUUUU", []string{"unknown→up"}},
		{"down then rise", HealthConfig{}, "---++", "uuDDU", []string{"unknown→down", "down→up"}},
		{"successes reset by a failure", HealthConfig{}, "---+-+", "uuDDDD", []string{"unknown→down"}},
		{"rise 1 fall 1", HealthConfig{Rise: 1, Fall: 1}, "+-+", "UDU", []string{"unknown→up", "up→down", "down→up"}},
		{
			"flapping needs 2×rise",
			HealthConfig{Rise: 1, Fall: 1, FlapLimit: 3, FlapWindow: time.Minute},
			// flips: U→D, D→U, U→D (3 flips) → flapping: needs 2 successes
			"+-+-+++",
			"UDUDDUU",
			[]string{"unknown→up", "up→down", "down→up", "up→down", "down→up"},
		},
		{
			"flap damping off",
			HealthConfig{Rise: 1, Fall: 1, FlapLimit: -1},
			"+-+-+",
			"UDUDU",
			[]string{"unknown→up", "up→down", "down→up", "up→down", "down→up"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHealth("www", "fra1", tt.cfg)
			if h.State() != StateUnknown {
				t.Fatalf("new state %s", h.State())
			}
			var events []string
			now := t0
			for i, c := range tt.results {
				now = now.Add(time.Second)
				ev, changed := h.Observe(now, c == '+', "connect: refused")
				if changed {
					events = append(events, ev.From.String()+"→"+ev.To.String())
					if ev.Group != "www" || ev.Member != "fra1" || !ev.Time.Equal(now) || ev.Reason == "" {
						t.Errorf("event %+v", ev)
					}
					if ev.To == StateDown && !strings.Contains(ev.Reason, "connect: refused") {
						t.Errorf("down reason %q", ev.Reason)
					}
					if !h.LastChange().Equal(now) {
						t.Errorf("LastChange %v, want %v", h.LastChange(), now)
					}
				}
				want := map[byte]State{'u': StateUnknown, 'U': StateUp, 'D': StateDown}[tt.states[i]]
				if h.State() != want {
					t.Fatalf("after result %d (%c): state %s, want %s", i+1, c, h.State(), want)
				}
			}
			if strings.Join(events, " ") != strings.Join(tt.events, " ") {
				t.Errorf("events %q, want %q", events, tt.events)
			}
		})
	}
}

func TestHealthFlapWindowExpires(t *testing.T) {
	h := NewHealth("www", "fra1", HealthConfig{Rise: 1, Fall: 1, FlapLimit: 2, FlapWindow: time.Minute})
	h.Observe(t0, true, "")                      // unknown→up, not a flip
	h.Observe(t0.Add(time.Second), false, "x")   // flip 1
	h.Observe(t0.Add(2*time.Second), true, "")   // flip 2
	h.Observe(t0.Add(3*time.Second), false, "x") // flip 3: flapping
	if !h.Flapping(t0.Add(4 * time.Second)) {
		t.Fatal("want flapping")
	}
	if _, changed := h.Observe(t0.Add(4*time.Second), true, ""); changed {
		t.Fatal("flapping member came up after one success")
	}
	// Two minutes later the flips are out of the window: rise is 1 again.
	later := t0.Add(2 * time.Minute)
	h.Observe(later, false, "x")
	if h.Flapping(later) {
		t.Fatal("still flapping after the window")
	}
	if ev, changed := h.Observe(later.Add(time.Second), true, ""); !changed || ev.To != StateUp {
		t.Fatalf("want up after one success, state %s", h.State())
	}
}

func TestStateText(t *testing.T) {
	for _, s := range []State{StateUnknown, StateUp, StateDown} {
		b, _ := s.MarshalText()
		var back State
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("%s: round trip %s, %v", s, back, err)
		}
	}
	var s State
	if err := s.UnmarshalText([]byte("sideways")); err == nil {
		t.Error("want an error")
	}
}
