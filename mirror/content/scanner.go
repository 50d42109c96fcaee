package content

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults of a Scanner.
const (
	// DefaultWorkers is how many directories a scan reads at once.
	DefaultWorkers = 4
	// DefaultHistory is how many change sets Since can join.
	DefaultHistory = 64
	// DefaultInterval is the time between rescans.
	DefaultInterval = 5 * time.Minute
	// DefaultSettle is how long a rescan that the watcher asked for waits
	// for more changes, so that a sync's burst of events is one rescan.
	DefaultSettle = 2 * time.Second
	// DefaultMaxWatches bounds the directories watched (inotify); a tree
	// with more is rescanned on the interval only, past the first ones.
	DefaultMaxWatches = 8192
)

// ScanOptions configure a Scanner; a zero field takes its default.
type ScanOptions struct {
	// Workers is how many directories a scan reads at once
	// (DefaultWorkers).
	Workers int
	// MaxFiles fails a scan that finds more files (DefaultMaxFiles).
	MaxFiles int
	// History is how many change sets are kept for Since (DefaultHistory);
	// they are also dropped once they hold more changes than half the
	// index's files, when the full index is about as small an answer.
	History int
	// Clock gives the first version and times the scans (default
	// time.Now).
	Clock func() time.Time
	// Interval is the time between Run's rescans (DefaultInterval).
	Interval time.Duration
	// Settle is the least that Run waits after the watcher told of a
	// change before it rescans (DefaultSettle; see settle).
	Settle time.Duration
	// MaxWatches bounds the directories that Run watches
	// (DefaultMaxWatches).
	MaxWatches int
	// After is Run's timer (default time.After).
	After func(time.Duration) <-chan time.Time
	// Logger gets Run's failed scans at Warn (default: discard).
	Logger *slog.Logger
	// Metrics, when set, get each scan (see NewMetrics).
	Metrics *Metrics

	watcher func(root string, max int) watcher // tests replace it
}

func (o ScanOptions) withDefaults() ScanOptions {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.History <= 0 {
		o.History = DefaultHistory
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o.runDefaults()
}

// Scanner keeps the index of one document root: each Scan makes the next
// version when something changed, and the change sets of the last
// versions are kept so that Since answers a sibling incrementally.
//
// Versions are a counter that starts at the clock's Unix time in
// microseconds when the Scanner is made, so that a version of an earlier
// process (a restart) is never taken for one of this one: Since answers
// it with the full index.
type Scanner struct {
	root string
	o    ScanOptions

	scanning sync.Mutex // held by Scan

	mu      sync.Mutex
	cur     *Index
	history []Changes // oldest first, each From the previous one's To
	dirs    []string  // of the last scan, for the watcher
}

// NewScanner returns a Scanner of root, with an empty index until the
// first Scan.
func NewScanner(root string, o ScanOptions) *Scanner {
	o = o.withDefaults()
	first := uint64(max(o.Clock().UnixMicro(), 1))
	return &Scanner{root: root, o: o, cur: &Index{version: first}}
}

// Current returns the current index.
func (s *Scanner) Current() *Index {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Scan scans the root and, when anything changed, makes the next version
// and returns its changes; with nothing changed the version stays. Scans
// run one at a time; the index and Since stay served meanwhile.
func (s *Scanner) Scan(ctx context.Context) (Changes, error) {
	s.scanning.Lock()
	defer s.scanning.Unlock()
	start := s.o.Clock()
	ch, skipped, err := s.scan(ctx)
	s.o.Metrics.scanned(s.Current(), skipped, s.o.Clock().Sub(start).Seconds(), err)
	return ch, err
}

// scan is Scan (s.scanning held), with the names it skipped.
func (s *Scanner) scan(ctx context.Context) (Changes, int, error) {
	cur := s.Current() // only Scan replaces it, and scans take turns
	res, err := scanTree(ctx, s.root, s.o.Workers, s.o.MaxFiles, cur.Len())
	if err != nil {
		return Changes{}, 0, err
	}
	next, err := indexOf(cur.Version()+1, res.files)
	if err != nil {
		return Changes{}, 0, err
	}
	ch := Diff(cur, next)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirs = res.dirs
	if len(ch.Changes) == 0 {
		return Changes{From: cur.Version(), To: cur.Version()}, res.skipped, nil
	}
	s.cur = next
	s.history = trimHistory(append(s.history, ch), s.o.History, next.Len())
	return ch, res.skipped, nil
}

// trimHistory drops the oldest change sets past n, or past holding more
// changes in all than half the files: the full index is then about as
// small an answer, and a scan's first change set (every file added) is
// never kept.
func trimHistory(h []Changes, n, files int) []Changes {
	total := 0
	for i := len(h) - 1; i >= 0; i-- {
		total += len(h[i].Changes)
		if len(h)-i > n || total > files/2 {
			return append([]Changes(nil), h[i+1:]...)
		}
	}
	return h
}

// Since returns the changes from version v to the current one, or false
// when v is not a version whose changes are still kept (too old, unknown,
// of another process): the caller sends the full index.
func (s *Scanner) Since(v uint64) (Changes, *Index, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return since(s.history, s.cur, v)
}

// Dirs returns the directories that the last scan read.
func (s *Scanner) Dirs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dirs
}
