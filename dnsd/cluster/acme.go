package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/transmirror/transmirror/dnsd/acme"
)

// acmeKeys is the acme/ key family: the live ACME DNS-01 challenges of
// the NS set (acme/GROUP/MEMBER/NAME/VALUE, a JSON acme.Challenge), each
// under a lease of its own that runs out when the challenge expires, so
// that a challenge goes even when the node that published it dies (the
// nodes' leases are not used: a challenge outlives its node's session).
// Every node keeps a copy of the family, which its DNS answers read; a
// write goes to etcd first and to the copy once etcd took it. While the
// node is degraded it refuses writes (acme.ErrUnavailable) and serves
// the copy, whose values expire by their own time.
type acmeKeys struct {
	log  *slog.Logger
	sess *session

	mu   sync.Mutex
	live map[string]acme.Challenge // by key without the prefix
}

var (
	_ family     = (*acmeKeys)(nil)
	_ acme.Store = (*acmeKeys)(nil)
)

func newACMEKeys(log *slog.Logger, sess *session) *acmeKeys {
	return &acmeKeys{log: log, sess: sess, live: map[string]acme.Challenge{}}
}

func (a *acmeKeys) prefix() string { return a.sess.prefix + "acme/" }

func (a *acmeKeys) resync(kvs []*mvccpb.KeyValue, _ int64) {
	live := make(map[string]acme.Challenge, len(kvs))
	for _, kv := range kvs {
		if c, ok := a.decode(kv); ok {
			live[c.Key()] = c
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.live = live
}

func (a *acmeKeys) apply(evs []*clientv3.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ev := range evs {
		if ev.Type == clientv3.EventTypeDelete {
			delete(a.live, strings.TrimPrefix(string(ev.Kv.Key), a.prefix()))
			continue
		}
		if c, ok := a.decode(ev.Kv); ok {
			a.live[c.Key()] = c
		}
	}
}

// decode reads one key; a value that does not decode, or whose key is not
// its own, is logged and skipped.
func (a *acmeKeys) decode(kv *mvccpb.KeyValue) (acme.Challenge, bool) {
	var c acme.Challenge
	if err := json.Unmarshal(kv.Value, &c); err != nil || a.prefix()+c.Key() != string(kv.Key) {
		a.log.Warn("cluster: acme challenge skipped", "key", string(kv.Key), "err", err)
		return c, false
	}
	return c, true
}

// Put writes c under a new lease that runs out at c.Expires.
func (a *acmeKeys) Put(c acme.Challenge) error {
	if !a.sess.connected() {
		return fmt.Errorf("%w: etcd unreachable", acme.ErrUnavailable)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("cluster: acme challenge: %w", err)
	}
	ttl := int64((c.Expires.Sub(a.sess.now()) + time.Second - 1) / time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), a.sess.timeout)
	defer cancel()
	g, err := a.sess.cli.Grant(ctx, max(ttl, 1))
	if err != nil {
		return fmt.Errorf("%w: lease: %w", acme.ErrUnavailable, err)
	}
	if _, err := a.sess.cli.Put(ctx, a.prefix()+c.Key(), string(b), clientv3.WithLease(g.ID)); err != nil {
		return fmt.Errorf("%w: put: %w", acme.ErrUnavailable, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.live[c.Key()] = c
	return nil
}

// Delete deletes c's key (its lease runs out by itself).
func (a *acmeKeys) Delete(c acme.Challenge) error {
	if !a.sess.connected() {
		return fmt.Errorf("%w: etcd unreachable", acme.ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.sess.timeout)
	defer cancel()
	if _, err := a.sess.cli.Delete(ctx, a.prefix()+c.Key()); err != nil {
		return fmt.Errorf("%w: delete: %w", acme.ErrUnavailable, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.live, c.Key())
	return nil
}

// List returns the node's copy of the family.
func (a *acmeKeys) List() []acme.Challenge {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Collect(maps.Values(a.live))
}
