package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// retryInterval is the pause between two attempts to reach etcd again.
const retryInterval = 500 * time.Millisecond

// family is one key family under the deployment's prefix (groups/,
// nodes/, pending/, health/): it owns its keys, their encoding and what
// they mean to this node. The session reads every family's keys when it
// starts and hands each the watched changes under its prefix.
type family interface {
	// prefix is the family's key prefix, the deployment's included.
	prefix() string
	// resync takes every key of the family as a new session read them,
	// at revision rev.
	resync(kvs []*mvccpb.KeyValue, rev int64)
	// apply takes a batch of watched changes of the family, in order.
	apply(evs []*clientv3.Event)
}

// What a family may do besides in a session's life; each is optional.
type (
	// joiner puts the family's keys of a new session under its lease,
	// before the session reads the state.
	joiner interface {
		join(ctx context.Context, l lease) error
	}
	// publisher writes what of this node's state changed, under the
	// lease, every publish interval.
	publisher interface {
		publish(ctx context.Context, l lease) error
	}
	// flusher writes what of this node's state waits, under the lease,
	// when the session is kicked.
	flusher interface {
		flush(ctx context.Context, l lease) error
	}
	// checker tells whether the session still holds (an error ends it):
	// at every check tick, and when kicked.
	checker interface {
		check(ctx context.Context) error
	}
	// listener is told when the node connected (a session read the
	// whole state) and when it lost etcd (a session ended, and what was
	// under its lease went with it).
	listener interface {
		connected(on bool)
	}
)

// lease is one session's lease, kept alive (alive) until the session's
// context ends, in the way of etcd's concurrency.Session.
type lease struct {
	id    clientv3.LeaseID
	alive <-chan *clientv3.LeaseKeepAliveResponse
}

// session keeps this node in etcd: one lease at a time, the whole state
// read at the start of each, then the watch of every change, handed to
// the family whose prefix it is under; and whether etcd can be reached
// (degraded), which every family may ask.
type session struct {
	log *slog.Logger
	cli *lazyClient
	sessionConfig
	now      func() time.Time
	families []family
	kicks    chan struct{}

	mu       sync.Mutex
	degraded bool
	since    time.Time // of the current degraded or connected spell
	lastErr  string

	degradedGauge prometheus.Gauge
	resyncs       prometheus.Counter
}

// sessionConfig is what a session is told of the cluster block.
type sessionConfig struct {
	node    string        // this node's name
	prefix  string        // the deployment's key prefix
	timeout time.Duration // of one request
	ttl     time.Duration // of the lease
	every   time.Duration // the publish interval
}

func newSession(log *slog.Logger, cli *lazyClient, cfg sessionConfig, now func() time.Time) *session {
	s := &session{log: log, cli: cli, sessionConfig: cfg, now: now, kicks: make(chan struct{}, 1),
		degraded: true, since: now()}
	s.degradedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_degraded",
		Help: "1 while this node can not reach etcd and serves from its last known state (membership changes refused), else 0.",
	})
	s.resyncs = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_resyncs_total",
		Help: "Times this node read the whole shared state from etcd (at start and each time etcd came back).",
	})
	s.degradedGauge.Set(1)
	return s
}

func (s *session) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.degradedGauge, s.resyncs}
}

// register adds a key family; before run only.
func (s *session) register(f family) { s.families = append(s.families, f) }

// kick wakes the session to flush what waits and check etcd now.
func (s *session) kick() {
	select {
	case s.kicks <- struct{}{}:
	default:
	}
}

// state returns whether etcd is away, since when (or since when it is
// there), and the last failure.
func (s *session) state() (degraded bool, since time.Time, lastErr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.degraded, s.since, s.lastErr
}

// connected reports whether etcd can be reached.
func (s *session) connected() bool {
	d, _, _ := s.state()
	return !d
}

// setDegraded records whether etcd is away, with the error that says so.
func (s *session) setDegraded(on bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.lastErr = err.Error()
	}
	if on == s.degraded {
		return
	}
	s.degraded, s.since = on, s.now()
	if on {
		s.degradedGauge.Set(1)
		s.log.Warn("cluster degraded: etcd unreachable or refusing this node; serving the last known state, membership changes refused", "node", s.node, "err", s.lastErr)
		return
	}
	s.lastErr = ""
	s.degradedGauge.Set(0)
	s.log.Info("cluster connected: sharing state through etcd", "node", s.node)
}

// run keeps a session with etcd until ctx is done, starting a new one
// (after a pause) whenever one ends.
func (s *session) run(ctx context.Context) error {
	for {
		err := s.life(ctx)
		if ctx.Err() == nil {
			s.setDegraded(true, s.cli.explain(err))
		}
		s.notify(false)
		if ctx.Err() != nil {
			return nil
		}
		t := time.NewTimer(retryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// life is one session: a lease with the families' keys under it (join),
// the whole state read and handed to the families, then the watch of
// every change until something fails (its error) or ctx ends. The lease
// is revoked at the end, so that its keys go at once rather than when it
// runs out.
func (s *session) life(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l, err := s.grant(ctx)
	if l.id != 0 {
		defer func() {
			c, cancel := context.WithTimeout(context.Background(), s.timeout)
			defer cancel()
			_, _ = s.cli.Revoke(c, l.id)
		}()
	}
	if err != nil {
		return err
	}
	for _, f := range s.families {
		if j, ok := f.(joiner); ok {
			if err := j.join(ctx, l); err != nil {
				return err
			}
		}
	}
	rev, err := s.resync(ctx)
	if err != nil {
		return err
	}
	return s.follow(ctx, l, rev)
}

// grant grants a lease and keeps it alive until ctx ends.
func (s *session) grant(ctx context.Context) (lease, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	g, err := s.cli.Grant(rctx, int64(s.ttl/time.Second))
	if err != nil {
		return lease{}, fmt.Errorf("lease: %w", err)
	}
	ka, err := s.cli.KeepAlive(ctx, g.ID)
	if err != nil {
		return lease{id: g.ID}, fmt.Errorf("lease keep-alive: %w", err)
	}
	return lease{id: g.ID, alive: ka}, nil
}

// resync reads the whole state under the prefix, hands each family its
// keys (in the order the families were registered), says the node is
// connected and returns the revision read.
func (s *session) resync(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(rctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("read state: %w", err)
	}
	by := make([][]*mvccpb.KeyValue, len(s.families))
	for _, kv := range resp.Kvs {
		if i := s.familyOf(string(kv.Key)); i >= 0 {
			by[i] = append(by[i], kv)
		}
	}
	s.resyncs.Inc()
	for i, f := range s.families {
		f.resync(by[i], resp.Header.Revision)
	}
	s.setDegraded(false, nil)
	s.notify(true)
	return resp.Header.Revision, nil
}

// familyOf returns the index of the family key is under, or -1.
func (s *session) familyOf(key string) int {
	for i, f := range s.families {
		if strings.HasPrefix(key, f.prefix()) {
			return i
		}
	}
	return -1
}

// notify tells the listening families whether the node is connected.
func (s *session) notify(on bool) {
	for _, f := range s.families {
		if l, ok := f.(listener); ok {
			l.connected(on)
		}
	}
}

// follow watches the state from revision rev on and hands each batch of
// changes to the families by prefix; it keeps the lease alive, checks
// every min(1 s, ttl/3), publishes every publish interval, and flushes
// and checks when kicked, until something fails or ctx ends.
func (s *session) follow(ctx context.Context, l lease, rev int64) error {
	wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	check := time.NewTicker(min(time.Second, s.ttl/3))
	defer check.Stop()
	share := time.NewTicker(s.every)
	defer share.Stop()
	for {
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wr, ok := <-wch:
			if !ok {
				return errors.New("watch ended")
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			s.dispatch(wr.Events)
		case _, ok := <-l.alive:
			if !ok {
				return errors.New("lease lost")
			}
		case <-check.C:
			err = s.check(ctx)
		case <-share.C:
			err = s.publish(ctx, l)
		case <-s.kicks:
			if err = s.flush(ctx, l); err == nil {
				err = s.check(ctx)
			}
		}
		if err != nil {
			return err
		}
	}
}

// dispatch hands each family its changes of one watch batch, in order.
func (s *session) dispatch(evs []*clientv3.Event) {
	by := make([][]*clientv3.Event, len(s.families))
	for _, ev := range evs {
		if i := s.familyOf(string(ev.Kv.Key)); i >= 0 {
			by[i] = append(by[i], ev)
		}
	}
	for i, f := range s.families {
		if len(by[i]) > 0 {
			f.apply(by[i])
		}
	}
}

func (s *session) publish(ctx context.Context, l lease) error {
	for _, f := range s.families {
		if p, ok := f.(publisher); ok {
			if err := p.publish(ctx, l); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *session) flush(ctx context.Context, l lease) error {
	for _, f := range s.families {
		if p, ok := f.(flusher); ok {
			if err := p.flush(ctx, l); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *session) check(ctx context.Context) error {
	for _, f := range s.families {
		if c, ok := f.(checker); ok {
			if err := c.check(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
