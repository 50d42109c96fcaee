package probe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMasterInterval is how often a MasterWatcher fetches the masters'
// trace files: a master's generation moves once a sync, hours apart, and
// max_lag is a minute at least.
const DefaultMasterInterval = 30 * time.Second

// FetchTrace fetches the trace file at url and parses its first line
// (ParseTrace): a 200 whose body's first line, at most MaxTraceLine
// bytes, is the master's generation. The deadline comes from ctx.
func FetchTrace(ctx context.Context, client *http.Client, url string) (time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("probe: master trace: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("probe: master trace: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("probe: master trace: status %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxTraceLine+1))
	if err != nil {
		return time.Time{}, fmt.Errorf("probe: master trace: %w", err)
	}
	line, _, found := bytes.Cut(b, []byte("\n"))
	if !found && len(b) > MaxTraceLine {
		return time.Time{}, fmt.Errorf("probe: master trace: first line longer than %d bytes", MaxTraceLine)
	}
	return ParseTrace(string(line))
}

// MasterWatcherOptions configure a MasterWatcher.
type MasterWatcherOptions struct {
	// Targets returns the groups that name a master and its trace URL, by
	// group; it is asked at every round, so that a reload takes effect.
	Targets func() map[string]string
	// OnGeneration gets each group's master generation after each round:
	// the newest fetched, kept while fetches fail; zero for a group that
	// names no master (any more) or whose master never answered.
	OnGeneration func(group string, gen time.Time)
	// Client fetches the traces (required).
	Client *http.Client
	// Interval is the time between rounds (default DefaultMasterInterval);
	// Timeout bounds one fetch (default 5 s, at most Interval).
	Interval, Timeout time.Duration
	// Registerer gets transmirror_dnsd_master_errors_total{group}; nil
	// keeps it private.
	Registerer prometheus.Registerer
	// Logger gets a failing master once per failing spell (default
	// discards).
	Logger *slog.Logger
}

// MasterWatcher fetches the trace files of the groups' masters, the
// generation that "newest" is under the freshness rule of such a group.
type MasterWatcher struct {
	o    MasterWatcherOptions
	errs *prometheus.CounterVec
	last map[string]masterState // by group; only Run touches it
}

type masterState struct {
	url     string
	gen     time.Time
	failing bool
}

// NewMasterWatcher returns a MasterWatcher with its counter registered.
func NewMasterWatcher(o MasterWatcherOptions) (*MasterWatcher, error) {
	if o.Targets == nil || o.OnGeneration == nil || o.Client == nil {
		return nil, fmt.Errorf("%w: master watcher: Targets, OnGeneration and Client are required", ErrInvalidSpec)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultMasterInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	o.Timeout = min(o.Timeout, o.Interval)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	w := &MasterWatcher{o: o, last: map[string]masterState{}, errs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "master_errors_total",
		Help: "Fetches of a group's master trace that gave no generation (unreachable, not 200, unparsable), by group.",
	}, []string{"group"})}
	if o.Registerer != nil {
		if err := o.Registerer.Register(w.errs); err != nil {
			return nil, fmt.Errorf("probe: register master metrics: %w", err)
		}
	}
	return w, nil
}

// Run fetches every master once per interval until ctx is done.
func (w *MasterWatcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.o.Interval)
	defer t.Stop()
	for {
		w.Round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round fetches every master once, one after the other, and reports each
// group's generation; a group that names no master any more is reported
// zero once and forgotten.
func (w *MasterWatcher) Round(ctx context.Context) {
	targets := w.o.Targets()
	for group := range w.last {
		if _, ok := targets[group]; !ok {
			delete(w.last, group)
			w.errs.DeleteLabelValues(group)
			w.o.OnGeneration(group, time.Time{})
		}
	}
	for group, url := range targets {
		st := w.last[group]
		if st.url != url {
			st = masterState{url: url}
		}
		fctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
		gen, err := FetchTrace(fctx, w.o.Client, url)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return // shutting down
		case err != nil:
			w.errs.WithLabelValues(group).Inc()
			if !st.failing {
				w.o.Logger.Warn("master trace gives no generation: keeping the last one", "group", group, "url", url, "last", st.gen, "err", err)
			}
			st.failing = true
		default:
			if st.failing {
				w.o.Logger.Info("master trace readable again", "group", group, "url", url, "generation", gen)
			}
			st.gen, st.failing = gen, false
		}
		w.last[group] = st
		w.o.OnGeneration(group, st.gen)
	}
}
