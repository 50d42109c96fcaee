package api

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRoutePath(t *testing.T) {
	tests := []struct {
		name   string
		route  Route
		values []string
		method string
		want   string
	}{
		{"no wildcard", ListGroups, nil, "GET", "/v1/groups"},
		{"group", GetGroup, []string{"www.example.org."}, "GET", "/v1/groups/www.example.org."},
		{"group and member", PushLoad, []string{"www", "fra1"}, "POST", "/v1/groups/www/members/fra1/load"},
		{"delete", RemoveMember, []string{"www", "fra1"}, "DELETE", "/v1/groups/www/members/fra1"},
		{"escaped", RemoveMember, []string{"a/b", "c d?"}, "DELETE", "/v1/groups/a%2Fb/members/c%20d%3F"},
		{"missing value left as is", DrainMember, []string{"www"}, "POST", "/v1/groups/www/members/{member}/drain"},
		{"extra values ignored", ListGroups, []string{"x"}, "GET", "/v1/groups"},
		{"constant path", Healthy, nil, "GET", HealthyPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.route.Path(tt.values...); got != tt.want {
				t.Errorf("Path = %q, want %q", got, tt.want)
			}
			if got := tt.route.Method(); got != tt.method {
				t.Errorf("Method = %q, want %q", got, tt.method)
			}
		})
	}
}

// TestRoutesServe registers every route on one mux, as the daemons do,
// and checks that the path a client fills in reaches it with the values.
func TestRoutesServe(t *testing.T) {
	mux := http.NewServeMux()
	for _, r := range Routes() {
		mux.HandleFunc(r.Pattern(), func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("X-Route", string(r))
			w.Header().Set("X-Values", req.PathValue(GroupParam)+"|"+req.PathValue(MemberParam))
		})
	}
	seen := map[Route]bool{}
	for _, r := range Routes() {
		t.Run(string(r), func(t *testing.T) {
			if seen[r] {
				t.Fatalf("listed twice")
			}
			seen[r] = true
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(r.Method(), r.Path("www.example.org.", "fra/1"), nil))
			if got := rec.Header().Get("X-Route"); got != string(r) {
				t.Fatalf("served by %q", got)
			}
			want := "|"
			switch strings.Count(string(r), "{") {
			case 1:
				want = "www.example.org.|"
			case 2:
				want = "www.example.org.|fra/1"
			}
			if got := rec.Header().Get("X-Values"); got != want {
				t.Errorf("path values %q, want %q", got, want)
			}
		})
	}
}

// TestReadmeNamesRoutes checks that the README's admin API sections name
// every route the way this package spells it.
func TestReadmeNamesRoutes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, r := range Routes() {
		t.Run(string(r), func(t *testing.T) {
			if !strings.Contains(readme, "`"+string(r)) {
				t.Errorf("README.md does not name `%s`", r)
			}
		})
	}
}
