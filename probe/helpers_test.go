package probe

import (
	"sync"
	"time"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// loadPath is where the tests mount a Reporter, as a mirror does.
const loadPath = "/v1/load"

// t0 is a fixed instant, aligned to the second, for fake clocks.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
