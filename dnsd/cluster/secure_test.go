package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/cluster"
	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/zones"
)

// nopApplier takes the shared state and serves nothing.
type nopApplier struct{}

func (nopApplier) Apply(members.State) error   { return nil }
func (nopApplier) Replace(members.State) error { return nil }

// TestSecureEtcdAwayAtStart: a Store with a username and password (whose
// etcd client authenticates before it returns) made while its etcd is
// away is made all the same and starts degraded, saying why, like one
// without; once etcd is back it connects, over TLS, as the user.
func TestSecureEtcdAwayAtStart(t *testing.T) {
	ca := probetest.NewCA(t, t.TempDir(), "ca")
	etcd := etcdtest.StartSecure(t, etcdtest.Secure{CA: ca, Prefix: "/secure/"})
	cert, key := etcd.ClientCert(t, "a")
	etcd.Stop()
	s, err := cluster.New(cluster.Options{Config: zones.ClusterConfig{Node: "a", PendingInterval: zones.Duration(time.Second),
		Etcd: zones.EtcdConfig{Endpoints: []string{etcd.Endpoint()}, Prefix: "/secure/", CAFile: ca.File,
			CertFile: cert, KeyFile: key, Username: etcdtest.User, Password: etcd.Password(),
			DialTimeout: zones.Duration(500 * time.Millisecond), RequestTimeout: zones.Duration(500 * time.Millisecond),
			LeaseTTL: zones.Duration(2 * time.Second)}}})
	if err != nil {
		t.Fatalf("New while etcd is away: %v, want a Store that starts degraded", err)
	}
	defer s.Close()
	if _, err := s.Load(); err != nil {
		t.Fatalf("Load while etcd is away: %v", err)
	}
	if st := s.Status(); !st.Degraded || !strings.Contains(st.Error, "connection refused") {
		t.Errorf("status while etcd is away: %+v, want degraded, saying the connection was refused", st)
	}
	etcd.Restart()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nopApplier{}) }()
	defer func() { cancel(); <-done }()
	probetest.Until(t, 10*time.Second, func() string {
		if st := s.Status(); st.Degraded || len(st.Nodes) != 1 {
			return "etcd back: still degraded or not in nodes/: " + st.Error
		}
		return ""
	})
}
