package probe

import (
	"fmt"
	"time"
)

// State is a member's health.
type State int8

// The health states. A new member is StateUnknown, which is not down.
const (
	StateUnknown State = iota // no verdict yet
	StateUp                   // rise consecutive successes
	StateDown                 // fall consecutive failures
)

var stateNames = [...]string{StateUnknown: "unknown", StateUp: "up", StateDown: "down"}

// String returns "unknown", "up" or "down".
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("state(%d)", int8(s))
	}
	return stateNames[s]
}

// MarshalText writes the state's name.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name.
func (s *State) UnmarshalText(b []byte) error {
	for i, n := range stateNames {
		if n == string(b) {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("probe: unknown state %q", b)
}

// HealthConfig is the hysteresis of a Health.
type HealthConfig struct {
	// Rise is the consecutive successes that bring a member up (default 2).
	Rise int
	// Fall is the consecutive failures that take a member down (default 3).
	Fall int
	// FlapLimit is the number of flips between up and down within
	// FlapWindow that make a member flapping (default 4); a flapping member
	// needs 2×Rise successes to come up. Negative turns damping off.
	FlapLimit int
	// FlapWindow is the window of FlapLimit (default 5 minutes).
	FlapWindow time.Duration
	// ReportMaxSkew is how far ahead of the Watcher's clock a report's
	// time may be (default DefaultReportMaxSkew), and ReportMaxAge how far
	// behind (default DefaultReportMaxAge): a pushed report outside is
	// refused, a pulled one is timed by the Watcher's clock instead (see
	// Watcher.Push). Health itself does not use them.
	ReportMaxSkew, ReportMaxAge time.Duration
}

func (c HealthConfig) withDefaults() HealthConfig {
	if c.Rise <= 0 {
		c.Rise = 2
	}
	if c.Fall <= 0 {
		c.Fall = 3
	}
	if c.FlapLimit == 0 {
		c.FlapLimit = 4
	}
	if c.FlapWindow <= 0 {
		c.FlapWindow = 5 * time.Minute
	}
	if c.ReportMaxSkew <= 0 {
		c.ReportMaxSkew = DefaultReportMaxSkew
	}
	if c.ReportMaxAge <= 0 {
		c.ReportMaxAge = DefaultReportMaxAge
	}
	return c
}

// Event is one change of a member's state.
type Event struct {
	// Time is when the change happened.
	Time time.Time `json:"time"`
	// Group and Member name the member.
	Group  string `json:"group"`
	Member string `json:"member"`
	// From and To are the states before and after.
	From State `json:"from"`
	To   State `json:"to"`
	// Reason says why: the last failure going down, the successes going up.
	Reason string `json:"reason"`
}

// Health is one member's health with rise/fall hysteresis and flap
// damping. It is pure: time comes in as arguments. It is not safe for
// concurrent use.
type Health struct {
	cfg           HealthConfig
	group, member string
	state         State
	successes     int
	failures      int
	changed       time.Time
	flips         []time.Time // up↔down flips, at most FlapLimit, oldest first
}

// NewHealth returns the Health of a new member, StateUnknown.
func NewHealth(group, member string, cfg HealthConfig) *Health {
	return &Health{cfg: cfg.withDefaults(), group: group, member: member}
}

// State returns the current state.
func (h *Health) State() State { return h.state }

// SetConfig changes the hysteresis (a reload); the state and the current
// run of successes or failures are kept, so a lower fall takes effect with
// the next failure.
func (h *Health) SetConfig(cfg HealthConfig) {
	h.cfg = cfg.withDefaults()
	if h.cfg.FlapLimit > 0 && len(h.flips) > h.cfg.FlapLimit {
		h.flips = h.flips[len(h.flips)-h.cfg.FlapLimit:]
	}
}

// LastChange returns when the state last changed, zero if never.
func (h *Health) LastChange() time.Time { return h.changed }

// Flapping reports whether the member flipped FlapLimit times within
// FlapWindow before now.
func (h *Health) Flapping(now time.Time) bool {
	return h.cfg.FlapLimit > 0 && len(h.flips) >= h.cfg.FlapLimit && now.Sub(h.flips[0]) <= h.cfg.FlapWindow
}

// rise is the successes needed to come up now.
func (h *Health) rise(now time.Time) int {
	if h.state == StateDown && h.Flapping(now) {
		return 2 * h.cfg.Rise
	}
	return h.cfg.Rise
}

// Observe records one probe result at now, ok or failed for reason, and
// returns the Event when the state changed.
func (h *Health) Observe(now time.Time, ok bool, reason string) (Event, bool) {
	to := h.state
	if ok {
		h.successes++
		h.failures = 0
		if h.state != StateUp {
			if need := h.rise(now); h.successes >= need {
				to = StateUp
				reason = fmt.Sprintf("%d consecutive successes", h.successes)
				if need > h.cfg.Rise {
					reason += " (flapping)"
				}
			}
		}
	} else {
		h.failures++
		h.successes = 0
		if h.state != StateDown && h.failures >= h.cfg.Fall {
			to = StateDown
			reason = fmt.Sprintf("%d consecutive failures, last: %s", h.failures, reason)
		}
	}
	if to == h.state {
		return Event{}, false
	}
	ev := Event{Time: now, Group: h.group, Member: h.member, From: h.state, To: to, Reason: reason}
	if h.state != StateUnknown && h.cfg.FlapLimit > 0 {
		if len(h.flips) == h.cfg.FlapLimit {
			h.flips = append(h.flips[:0], h.flips[1:]...)
		}
		h.flips = append(h.flips, now)
	}
	h.state, h.changed = to, now
	return ev, true
}
