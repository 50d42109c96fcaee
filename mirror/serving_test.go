package mirror

import (
	"net/http"
	"testing"

	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe"
)

// TestNotServingHandlers: the health and load report endpoints of a
// mirror that is not serving, as a table.
func TestNotServingHandlers(t *testing.T) {
	rep, err := probe.NewReporter(probe.ReporterConfig{Group: "www.example.test", Member: "a", Capacity: 1,
		RunQueue: func() (float64, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		serving func() bool
		want    int
	}{
		{"no site front end", nil, http.StatusOK},
		{"serving", func() bool { return true }, http.StatusOK},
		{"not serving", func() bool { return false }, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := webtest.Serve(t, NewAdminHandler(AdminOptions{Reporter: rep, Serving: tc.serving}))
			public := webtest.Serve(t, WithHealth(tc.serving, http.NotFoundHandler()))
			for _, u := range []string{admin + HealthPath, admin + "/v1/load", public + HealthPath} {
				if resp, body := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, u, nil)); resp.StatusCode != tc.want {
					t.Errorf("GET %s: %d %q, want %d", u, resp.StatusCode, body, tc.want)
				}
			}
		})
	}
}
