package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/probe/api"
)

// acmeDNSD is dnsd's ACME routes as the solver sees them: down answers
// 503 to every publish; it lists names and groups fully qualified, as
// dnsd does.
type acmeDNSD struct {
	down bool
	mu   sync.Mutex
	live []api.ACMELive
	ops  []string // "PUT name", "DELETE name"
}

func (d *acmeDNSD) start(t *testing.T) string {
	mux := http.NewServeMux()
	change := func(w http.ResponseWriter, r *http.Request) {
		var ch api.ACMEChallenge
		json.NewDecoder(r.Body).Decode(&ch)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.ops = append(d.ops, r.Method+" "+ch.Name)
		if d.down {
			http.Error(w, `{"error": "etcd unreachable"}`, http.StatusServiceUnavailable)
			return
		}
		live := api.ACMELive{Group: r.PathValue("group") + ".", Member: r.PathValue("member"), Name: ch.Name + ".", Value: ch.Value}
		if r.Method == http.MethodPut {
			d.live = append(d.live, live)
			json.NewEncoder(w).Encode(ch)
			return
		}
		d.live = slices.DeleteFunc(d.live, func(l api.ACMELive) bool { return l == live })
		json.NewEncoder(w).Encode(api.ACMERemoved{Removed: true})
	}
	mux.HandleFunc(api.PublishChallenge.Pattern(), change)
	mux.HandleFunc(api.RemoveChallenge.Pattern(), change)
	mux.HandleFunc(api.ListChallenges.Pattern(), func(w http.ResponseWriter, _ *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		json.NewEncoder(w).Encode(api.ACMEChallenges{Challenges: d.live})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDNSDSolver: a value goes to the first dnsd that takes it (not to a
// dnsd that refuses it, nor to the ones after), Publish returns once it
// is listed, and Remove goes to the dnsd that took it.
func TestDNSDSolver(t *testing.T) {
	down, up, spare := &acmeDNSD{down: true}, &acmeDNSD{}, &acmeDNSD{}
	cfg := &mirror.Config{Group: "www.example.org", Member: "fra1", Host: "fra1.example.org"}
	cfg.DNSD.URLs = []string{down.start(t), up.start(t), spare.start(t)}
	cfg.DNSD.Secret = testSecret
	s, err := newDNSDSolver(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const value = "OQ0pNRmE6F5vS0wfYOQzGzC4dy4ZGqK0ddAAtBjV1Dc"
	ctx := context.Background()
	if err := s.Publish(ctx, "www.example.org", value); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "www.example.org", value); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		d    *acmeDNSD
		want []string
	}{
		{"refusing", down, []string{"PUT www.example.org"}},
		{"taking", up, []string{"PUT www.example.org", "DELETE www.example.org"}},
		{"spare", spare, nil},
	} {
		if !slices.Equal(tt.d.ops, tt.want) {
			t.Errorf("%s dnsd: %q, want %q", tt.name, tt.d.ops, tt.want)
		}
	}
	if len(up.live) != 0 {
		t.Errorf("left live: %+v", up.live)
	}
	if got := acmeNames(cfg); !slices.Equal(got, []string{"www.example.org", "fra1.example.org"}) {
		t.Errorf("acmeNames = %q", got)
	}
}
