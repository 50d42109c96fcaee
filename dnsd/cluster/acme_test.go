package cluster_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/acme"
	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/probe/probetest"
)

const (
	acmeValue1 = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
	acmeValue2 = "9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI"
)

func (n *node) book(t *testing.T) (*acme.Book, acme.Served) {
	t.Helper()
	b, err := acme.New(acme.Options{Set: n.ctl.Current, Store: n.store.Challenges()})
	if err != nil {
		t.Fatal(err)
	}
	return b, acme.Served{Store: n.store.Challenges()}
}

// waitTXT waits until s serves exactly want at the group name's
// challenge.
func waitTXT(t *testing.T, n *node, s acme.Served, want ...string) {
	t.Helper()
	slices.Sort(want)
	probetest.Until(t, 5*time.Second, func() string {
		if got := s.TXT("_acme-challenge.www.example.org."); !slices.Equal(got, want) {
			return fmt.Sprintf("served %q, want %q", got, want)
		}
		return ""
	})
}

// TestChallengesShared: a value published on one node is served by the
// other, removed on the other it goes from both; one whose node dies
// goes when its lease runs out.
func TestChallengesShared(t *testing.T) {
	etcd := etcdtest.Start(t)
	a := startNode(t, t.TempDir(), "a", etcd.Endpoint())
	b := startNode(t, t.TempDir(), "b", etcd.Endpoint())
	for _, n := range []*node{a, b} {
		probetest.Until(t, 5*time.Second, func() string {
			if n.store.Status().Degraded {
				return "degraded"
			}
			return ""
		})
	}
	bookA, dnsA := a.book(t)
	bookB, dnsB := b.book(t)
	if _, err := bookA.Publish("www.example.org.", "fra1", "www.example.org.", acmeValue1); err != nil {
		t.Fatal(err)
	}
	waitTXT(t, b, dnsB, acmeValue1)
	if removed, err := bookB.Remove("www.example.org.", "fra1", "www.example.org.", acmeValue1); err != nil || !removed {
		t.Fatalf("remove on b: %v %v", removed, err)
	}
	waitTXT(t, a, dnsA)

	// A challenge that expires in 2 s, put by a, which then dies: its
	// lease takes it out of etcd, and b's copy, by itself.
	c := acme.Challenge{Group: "www.example.org.", Member: "fra1", Name: "www.example.org.", Value: acmeValue2, Expires: time.Now().Add(2 * time.Second)}
	if err := a.store.Challenges().Put(c); err != nil {
		t.Fatal(err)
	}
	waitTXT(t, b, dnsB, acmeValue2)
	a.stop()
	probetest.Until(t, 10*time.Second, func() string {
		if l := b.store.Challenges().List(); len(l) > 0 {
			return fmt.Sprintf("b still keeps %v", l)
		}
		return ""
	})
	if err := a.store.Challenges().Put(c); !errors.Is(err, acme.ErrUnavailable) {
		t.Errorf("put on a stopped node: %v, want ErrUnavailable", err)
	}
}
