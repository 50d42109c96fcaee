package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxTraceLine is how much of a trace file is read: its first line, at
// most this many bytes.
const MaxTraceLine = 256

// traceWarnEvery is how often a failing trace is warned of: once a
// minute at most, with the count of the failures in between.
const traceWarnEvery = time.Minute

// ParseTrace parses the first line of a trace file as a generation, the
// time the mirror's last complete sync was taken from its master. It
// accepts, after trimming white space:
//
//	Tue Dec  1 12:00:01 UTC 2026   the output of date -u (ftpsync's trace files); UTC or GMT only
//	2026-12-01T12:00:01Z           RFC 3339, fractions of a second allowed
//	1796126401                     a Unix timestamp in seconds
//
// and anything else is an error, as is a time before 1970 or after 9999.
func ParseTrace(line string) (time.Time, error) {
	s := strings.TrimSpace(line)
	if s == "" {
		return time.Time{}, errors.New("probe: trace: empty first line")
	}
	t, err := parseTraceTime(s)
	if err != nil {
		return time.Time{}, err
	}
	if t = t.UTC(); t.Year() < 1970 || t.Year() > 9999 {
		return time.Time{}, fmt.Errorf("probe: trace: %q: year %d out of range", s, t.Year())
	}
	return t, nil
}

func parseTraceTime(s string) (time.Time, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > 253402300799 { // 9999-12-31T23:59:59Z
			return time.Time{}, fmt.Errorf("probe: trace: timestamp %d out of range", n)
		}
		return time.Unix(n, 0), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	f := strings.Fields(s)
	if len(f) == 6 && (f[4] == "UTC" || f[4] == "GMT") {
		if t, err := time.Parse("Mon Jan 2 15:04:05 2006", strings.Join(append(f[:4:4], f[5]), " ")); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("probe: trace: %q: not the output of date -u, RFC 3339 or a Unix timestamp", truncate(s, 64))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// ReadTrace reads the first line of the trace file at path (at most
// MaxTraceLine bytes: a longer first line is an error) and parses it
// (ParseTrace).
func ReadTrace(path string) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("probe: trace: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxTraceLine+1))
	if err != nil {
		return time.Time{}, fmt.Errorf("probe: trace: %w", err)
	}
	line, _, found := bytes.Cut(b, []byte("\n"))
	if !found && len(b) > MaxTraceLine {
		return time.Time{}, fmt.Errorf("probe: trace: first line longer than %d bytes", MaxTraceLine)
	}
	return ParseTrace(string(line))
}

// TraceConfig configures a Trace.
type TraceConfig struct {
	// Path is the trace file (required).
	Path string
	// Subsystem names the error counter,
	// transmirror_<subsystem>_trace_errors_total.
	Subsystem string
	// Registerer gets the counter; nil keeps it private.
	Registerer prometheus.Registerer
	// Clock times the warnings (default time.Now).
	Clock func() time.Time
	// Logger gets a warning when the trace can not be read, at most once
	// a minute, and a note when it can again (default discards).
	Logger *slog.Logger
}

// Trace is a mirror's generation as its trace file says, read again at
// every call of Generation. It is safe for concurrent use.
type Trace struct {
	cfg  TraceConfig
	errs prometheus.Counter

	mu         sync.Mutex
	failing    bool
	lastWarn   time.Time
	suppressed int
}

// NewTrace returns the Trace of cfg with its counter registered.
func NewTrace(cfg TraceConfig) (*Trace, error) {
	if cfg.Path == "" {
		return nil, fmt.Errorf("%w: trace: no path", ErrInvalidSpec)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Trace{cfg: cfg, errs: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: cfg.Subsystem, Name: "trace_errors_total",
		Help: "Reads of the trace file that gave no generation (unreadable or unparsable).",
	})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(t.errs); err != nil {
			return nil, fmt.Errorf("probe: register trace metrics: %w", err)
		}
	}
	return t, nil
}

// Generation returns the time the trace file's first line gives, zero
// (no generation) when it can not be read or parsed: that is counted and
// warned of, at most once a minute.
func (t *Trace) Generation() time.Time {
	g, err := ReadTrace(t.cfg.Path)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		if t.failing {
			t.cfg.Logger.Info("trace file readable again", "path", t.cfg.Path, "generation", g)
		}
		t.failing, t.suppressed = false, 0
		return g
	}
	t.errs.Inc()
	now := t.cfg.Clock()
	if !t.failing || now.Sub(t.lastWarn) >= traceWarnEvery {
		t.cfg.Logger.Warn("trace file gives no generation", "path", t.cfg.Path, "err", err, "suppressed", t.suppressed)
		t.lastWarn, t.suppressed = now, 0
	} else {
		t.suppressed++
	}
	t.failing = true
	return time.Time{}
}
