package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/probe/api"
)

// TestExplainRedirects checks that the explanation carries what each member
// serves and the redirect filter for the client, from the group view,
// and goes without them when dnsd has no view.
func TestExplainRedirects(t *testing.T) {
	v, _ := whereFixture()
	tests := []struct {
		name      string
		m         Membership
		client    string
		wantHTTPS []string
		wantServe []string // fra1's, then ams1's, joined by |
	}{
		{"IPv4 client", viewMembership{v: v}, "198.51.100.7", []string{"ams1"}, []string{"http IPv4 IPv6", "http https IPv4 IPv6"}},
		{"no view", nil, "198.51.100.7", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(Options{Logger: testenv.DiscardLogger(), Explainer: orderExplainer{"ams1"}, Membership: tt.m, Verifier: api.NewVerifier(30*time.Second, 0), Gatherer: prometheus.NewRegistry()})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, api.ExplainGroup.Path("www.example.org.")+"?client="+tt.client, nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var e api.Explanation
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			if tt.wantHTTPS == nil {
				if e.Redirects != nil || e.Members[0].Serves != nil {
					t.Errorf("without a view: redirects %+v, serves %v; want none", e.Redirects, e.Members[0].Serves)
				}
				return
			}
			if e.Redirects == nil || !reflect.DeepEqual(e.Redirects.HTTPS, tt.wantHTTPS) {
				t.Fatalf("redirects = %+v, want https to %v", e.Redirects, tt.wantHTTPS)
			}
			for i, name := range []string{"fra1", "ams1"} {
				got := ""
				for _, m := range e.Members {
					if m.Name == name {
						got = strings.Join(m.Serves, " ")
					}
				}
				if got != tt.wantServe[i] {
					t.Errorf("%s serves %q, want %q", name, got, tt.wantServe[i])
				}
			}
		})
	}
}
