package content

import (
	"context"
	"log/slog"
	"time"
)

// watcher tells of changes in the directories it watches: a value on
// Events (coalesced) after any change. It is the inotify watcher where
// there is one and never tells otherwise.
type watcher interface {
	// Watch watches dirs (relative to the root), at most its bound of
	// them, besides those it watches already.
	Watch(dirs []string)
	Events() <-chan struct{}
	Close() error
}

// noWatcher is the watcher where there is no inotify: rescans only.
type noWatcher struct{}

func (noWatcher) Watch([]string)          {}
func (noWatcher) Events() <-chan struct{} { return nil }
func (noWatcher) Close() error            { return nil }

// Run scans the root now and then every Interval, earlier when the
// watcher tells of a change, until ctx is done. An early rescan waits
// until the changes settle (see settle). A scan that fails is logged and
// the index stays as it was.
func (s *Scanner) Run(ctx context.Context) error {
	w := s.o.watcher(s.root, s.o.MaxWatches)
	defer w.Close()
	for {
		start := s.o.Clock()
		ch, err := s.Scan(ctx)
		if ctx.Err() != nil {
			return nil
		}
		took := s.o.Clock().Sub(start)
		if err != nil {
			s.o.Logger.Warn("content index scan failed", "root", s.root, "err", err)
		} else {
			s.o.Logger.Debug("content index scanned", "version", ch.To, "changes", len(ch.Changes),
				"files", s.Current().Len(), "seconds", took.Seconds())
		}
		w.Watch(s.Dirs())
		if !s.wait(ctx, w, settle(s.o.Settle, took)) {
			return nil
		}
	}
}

// scanShare bounds the time that early rescans spend scanning: see settle.
const scanShare = 10

// settle is how long an early rescan waits after the watcher told of a
// change: Settle, so that a burst of changes is one rescan, and at least
// scanShare−1 times as long as the last scan took, so that a tree that
// keeps changing (a sync that runs for an hour) is scanned at most a
// 1/scanShare of the time, not back to back.
func settle(min, lastScan time.Duration) time.Duration {
	return max(min, (scanShare-1)*lastScan)
}

// wait waits for the next rescan, after a change told settling for
// settle: false when ctx is done first.
func (s *Scanner) wait(ctx context.Context, w watcher, settle time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-s.o.After(s.o.Interval):
		return true
	case <-w.Events():
	}
	select {
	case <-ctx.Done():
		return false
	case <-s.o.After(settle):
	}
	select { // what came during the settling is in this rescan
	case <-w.Events():
	default:
	}
	return true
}

// runDefaults fills the options of Run.
func (o ScanOptions) runDefaults() ScanOptions {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Settle <= 0 {
		o.Settle = DefaultSettle
	}
	if o.MaxWatches <= 0 {
		o.MaxWatches = DefaultMaxWatches
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.watcher == nil {
		o.watcher = newWatcher
	}
	return o
}
