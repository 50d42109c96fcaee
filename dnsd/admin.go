package dnsd

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Reloader reloads the configuration: load, validate, swap. On error the
// old configuration keeps serving and the error says why.
type Reloader interface {
	Reload(ctx context.Context) error
}

// AdminOptions configures the admin HTTP handler.
type AdminOptions struct {
	Logger   *slog.Logger
	Gatherer prometheus.Gatherer
	Reloader Reloader
}

// NewAdmin returns dnsd's admin HTTP handler: /metrics, /-/healthy,
// /-/ready and POST /-/reload (loopback callers only).
func NewAdmin(o AdminOptions) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)}))
	mux.HandleFunc("GET /-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /-/ready", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("POST /-/reload", func(w http.ResponseWriter, r *http.Request) {
		if !fromLoopback(r) {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "reload is allowed from loopback only"})
			return
		}
		if err := o.Reloader.Reload(r.Context()); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "reloaded"})
	})
	return mux
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
