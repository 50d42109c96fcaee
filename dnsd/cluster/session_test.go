package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/probe/probetest"
)

// recorder is a key family that records what the session hands it; with
// a join key it puts that key under each session's lease.
type recorder struct {
	pfx, joinKey string
	cli          *clientv3.Client

	mu        sync.Mutex
	read      []string // the keys of the last resync
	changes   []string // "PUT key" or "DELETE key", in order
	published int      // publishes and flushes
	conn      []bool
}

func (r *recorder) prefix() string { return r.pfx }

func (r *recorder) resync(kvs []*mvccpb.KeyValue, _ int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read = nil
	for _, kv := range kvs {
		r.read = append(r.read, string(kv.Key))
	}
}

func (r *recorder) apply(evs []*clientv3.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		r.changes = append(r.changes, ev.Type.String()+" "+string(ev.Kv.Key))
	}
}

func (r *recorder) join(ctx context.Context, l lease) error {
	if r.joinKey == "" {
		return nil
	}
	_, err := r.cli.Put(ctx, r.joinKey, "x", clientv3.WithLease(l.id))
	return err
}

func (r *recorder) publish(context.Context, lease) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.published++
	return nil
}

func (r *recorder) flush(ctx context.Context, l lease) error { return r.publish(ctx, l) }

func (r *recorder) connected(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conn = append(r.conn, on)
}

func (r *recorder) snapshot() (read, changes []string, published int, conn []bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.read), slices.Clone(r.changes), r.published, slices.Clone(r.conn)
}

// TestSessionFamilies: a session hands each registered family the keys
// under its prefix, read whole at the start and then watched, in order,
// and nothing of another prefix; it publishes and tells the families it
// connected, and when it ends it says so and its lease (with the keys a
// family put under it) goes.
func TestSessionFamilies(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	put := func(k string) {
		t.Helper()
		if _, err := cli.Put(ctx, k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	put("/s/a/before")
	put("/s/other/x")

	s := newSession(slog.New(slog.DiscardHandler), &lazyClient{cli: cli}, sessionConfig{node: "n1", prefix: "/s/",
		timeout: 2 * time.Second, ttl: 2 * time.Second, every: 50 * time.Millisecond}, time.Now)
	a := &recorder{pfx: "/s/a/", joinKey: "/s/joined/n1", cli: cli}
	b := &recorder{pfx: "/s/b/"}
	s.register(a)
	s.register(b)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.run(runCtx) }()
	probetest.Until(t, 10*time.Second, func() string {
		if !s.connected() {
			return "connected"
		}
		return ""
	})
	if read, _, _, _ := a.snapshot(); fmt.Sprint(read) != "[/s/a/before]" {
		t.Errorf("a read %v, want [/s/a/before]", read)
	}
	if read, _, _, _ := b.snapshot(); len(read) != 0 {
		t.Errorf("b read %v, want nothing", read)
	}

	put("/s/a/1")
	put("/s/b/1")
	put("/s/other/y")
	if _, err := cli.Delete(ctx, "/s/a/before"); err != nil {
		t.Fatal(err)
	}
	probetest.Until(t, 5*time.Second, func() string {
		_, ac, ap, _ := a.snapshot()
		_, bc, _, _ := b.snapshot()
		if strings.Join(ac, ", ") != "PUT /s/a/1, DELETE /s/a/before" || fmt.Sprint(bc) != "[PUT /s/b/1]" || ap == 0 {
			return fmt.Sprintf("a changes %v (published %d), b %v", ac, ap, bc)
		}
		return ""
	})

	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, _, _, conn := a.snapshot(); len(conn) < 2 || !conn[0] || conn[len(conn)-1] {
		t.Errorf("a told connected %v, want true first and false last", conn)
	}
	resp, err := cli.Get(ctx, "/s/joined/n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Error("the joined key is still there after the session ended: lease not revoked")
	}
}
