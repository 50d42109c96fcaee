package sitesim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/transmirror/transmirror/scheduler/sim/backend"
)

// Modes of the front end, as mirror/frontend's site.mode names them.
const (
	// ModeProxy relays every response byte through the front end.
	ModeProxy = "proxy"
	// ModeHandoff has the front end read the request and hand the
	// connection over: the response goes from the back end to the client.
	ModeHandoff = "handoff"
)

// FrontendCosts are what a request costs the front end's CPU.
type FrontendCosts struct {
	// PerRequest is the CPU time of accepting a client's connection,
	// reading its request, picking a back end and handing the request
	// over (proxy: writing it to the back end; handoff: passing the
	// connection), charged before the request waits for admission.
	PerRequest time.Duration
	// PerKiB is the CPU time of relaying a KiB of response, receiving it
	// from the back end and sending it to the client, charged once the
	// back end has sent it. Proxy mode only: in handoff mode nothing is
	// relayed.
	PerKiB time.Duration
}

// DefaultFrontendCosts are the front end's costs in mode when
// Config.Frontend is nil, in front of back ends whose costs are back
// (backend.LARDCosts when zero). They are assumptions, not figures of
// the LARD paper, whose costs (backend.LARDCosts) are the back end's
// alone: the front end is taken for a machine like the back ends.
//
// PerRequest is the back end's PerRequest (145 µs with the LARD
// costs, for setting up and tearing down a connection): the front end
// accepts the client's connection and reads its request as a back end
// would, and hands it over instead of answering. PerKiB is, in proxy
// mode, the back end's PerKiB (80 µs a KiB): relaying a byte is
// receiving it and sending it again, at least what sending it costs a
// back end; in handoff mode 0. This repository's own front-end
// benchmark (bench-http, in the README) measures a proxying front end
// at about 1.5 times a back end's CPU on a 1 MiB response, and a
// handing-off one at about 0.8 times a back end's CPU on a small
// response over a new connection: neither figure flatters the front end.
//
// So in proxy mode the front end spends at least what a back end spends
// on a cache hit, and it is the bottleneck once the back ends could
// serve more than one back end's worth of hits; in handoff mode, once
// they serve more requests than 1/PerRequest a second (about 6,900
// with the LARD costs).
func DefaultFrontendCosts(mode string, back backend.Costs) FrontendCosts {
	if back == (backend.Costs{}) {
		back = backend.LARDCosts
	}
	c := FrontendCosts{PerRequest: back.PerRequest}
	if mode != ModeHandoff {
		c.PerKiB = back.PerKiB
	}
	return c
}

// frontendCosts are the front end's costs in c, checked.
func frontendCosts(c Config) (FrontendCosts, error) {
	switch c.Mode {
	case "", ModeProxy, ModeHandoff:
	default:
		return FrontendCosts{}, fmt.Errorf("sitesim: mode %q: want %s or %s", c.Mode, ModeProxy, ModeHandoff)
	}
	if c.Frontend == nil {
		return DefaultFrontendCosts(c.Mode, c.Backend.Costs), nil
	}
	if c.Frontend.PerRequest < 0 || c.Frontend.PerKiB < 0 {
		return FrontendCosts{}, fmt.Errorf("sitesim: front-end costs %+v must not be negative", *c.Frontend)
	}
	return *c.Frontend, nil
}

// PolicyRand returns the random source that Run gives the policy for
// Config.Seed. A live front end given PolicyRand(seed) (mirror/frontend's
// Options.Rand) draws the same numbers, so that the two can be compared
// pick by pick.
func PolicyRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x73697465))
}

// cpu is a CPU that serves one piece of work at a time, in the order
// the work comes; times are virtual nanoseconds.
type cpu struct {
	free int64 // when it is next free
	busy int64 // the work done so far
}

// serve queues d of work arriving at at and returns when it is done.
func (c *cpu) serve(at, d int64) int64 {
	c.free = max(at, c.free) + d
	c.busy += d
	return c.free
}

// perKiB is the cost of size bytes at cost per KiB, in nanoseconds, as
// the back ends reckon it.
func perKiB(cost time.Duration, size int64) int64 {
	return int64(float64(cost) * float64(size) / 1024)
}
