package mirror

import "github.com/transmirror/transmirror/probe"

// RunQueueSource says where the load report's run-queue length m comes
// from (the run_queue key). The load is 10·(r + m) either way.
type RunQueueSource string

// The run_queue values.
const (
	// RunQueueLoadavg is the host's 1-minute load average (the default),
	// for a mirror that has its host to itself.
	RunQueueLoadavg RunQueueSource = "loadavg"
	// RunQueueInFlight is the mirror's own requests in flight at the
	// time of the report, for a mirror that shares its host with other
	// work, whose load average is not the mirror's.
	RunQueueInFlight RunQueueSource = "in_flight"
	// RunQueueNone is 0: the load is the request rate alone.
	RunQueueNone RunQueueSource = "none"
)

// valid reports whether s is one of the run_queue values.
func (s RunQueueSource) valid() bool {
	switch s {
	case RunQueueLoadavg, RunQueueInFlight, RunQueueNone:
		return true
	}
	return false
}

// Apply sets rc's run-queue source; rc.RunQueue is the reader of the
// host's load average ("" is the default, loadavg).
func (s RunQueueSource) Apply(rc *probe.ReporterConfig) {
	switch s {
	case RunQueueInFlight:
		rc.RunQueueInFlight = true
	case RunQueueNone:
		rc.RunQueue = func() (float64, error) { return 0, nil }
	}
}
