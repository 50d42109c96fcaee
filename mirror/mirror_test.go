package mirror

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestPublicHealthPath(t *testing.T) {
	h := WithHealth(nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "content", http.StatusTeapot) }))
	cases := []struct {
		name, method, path string
		want               int
	}{
		{"GET health", http.MethodGet, HealthPath, http.StatusOK},
		{"HEAD health", http.MethodHead, HealthPath, http.StatusOK},
		{"POST health goes on", http.MethodPost, HealthPath, http.StatusTeapot},
		{"other paths go on", http.MethodGet, "/pub/x", http.StatusTeapot},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.want {
				t.Errorf("%s %s: %d, want %d", tc.method, tc.path, rec.Code, tc.want)
			}
		})
	}
}
