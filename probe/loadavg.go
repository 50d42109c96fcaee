package probe

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// LoadavgPath is where Linux publishes the load averages.
const LoadavgPath = "/proc/loadavg"

// Loadavg is the content of /proc/loadavg.
type Loadavg struct {
	// Load1, Load5 and Load15 are the 1-, 5- and 15-minute load averages.
	Load1, Load5, Load15 float64
	// Running is the number of runnable scheduling entities at the time of
	// the read, the reader included.
	Running int
	// Total is the number of scheduling entities.
	Total int
	// LastPID is the most recently assigned process ID.
	LastPID int
}

// ParseLoadavg parses the content of /proc/loadavg, e.g.
// "0.52 0.58 0.59 2/1234 56789\n".
func ParseLoadavg(s string) (Loadavg, error) {
	f := strings.Fields(s)
	if len(f) != 5 {
		return Loadavg{}, fmt.Errorf("probe: loadavg %q: want 5 fields, have %d", s, len(f))
	}
	var l Loadavg
	for i, p := range []*float64{&l.Load1, &l.Load5, &l.Load15} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return Loadavg{}, fmt.Errorf("probe: loadavg field %d %q: want a non-negative number", i+1, f[i])
		}
		*p = v
	}
	run, total, ok := strings.Cut(f[3], "/")
	if !ok {
		return Loadavg{}, fmt.Errorf("probe: loadavg field 4 %q: want running/total", f[3])
	}
	var err error
	if l.Running, err = strconv.Atoi(run); err != nil || l.Running < 0 {
		return Loadavg{}, fmt.Errorf("probe: loadavg running count %q: want a non-negative integer", run)
	}
	if l.Total, err = strconv.Atoi(total); err != nil || l.Total < l.Running {
		return Loadavg{}, fmt.Errorf("probe: loadavg total %q: want an integer >= running", total)
	}
	if l.LastPID, err = strconv.Atoi(f[4]); err != nil || l.LastPID < 0 {
		return Loadavg{}, fmt.Errorf("probe: loadavg last pid %q: want a non-negative integer", f[4])
	}
	return l, nil
}

// ReadRunQueue returns the host's run-queue length as the report's m: the
// 1-minute load average from /proc/loadavg. It is the default
// ReporterConfig.RunQueue.
func ReadRunQueue() (float64, error) {
	b, err := os.ReadFile(LoadavgPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("probe: run queue: %w (not Linux?)", err)
		}
		return 0, fmt.Errorf("probe: run queue: %w", err)
	}
	l, err := ParseLoadavg(string(b))
	if err != nil {
		return 0, err
	}
	return l.Load1, nil
}
