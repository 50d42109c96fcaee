package dnsd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/transmirror/transmirror/probe/api"
)

// Reloader reloads the configuration: load, validate, swap. On error the
// old configuration keeps serving and the error says why.
type Reloader interface {
	Reload(ctx context.Context) error
}

// Explainer explains a group answer (implemented by Dispatcher).
type Explainer interface {
	Explain(group string, qtype uint16, client netip.Addr, ecs netip.Prefix) (api.Explanation, error)
}

// AdminOptions configures the admin HTTP handler.
type AdminOptions struct {
	Logger    *slog.Logger
	Gatherer  prometheus.Gatherer
	Reloader  Reloader
	Explainer Explainer
	// Membership serves /v1/groups; nil leaves it out.
	Membership Membership
	// Verifier checks signed writes (required with Membership).
	Verifier *api.Verifier
	// Now is the clock for signatures; nil means time.Now.
	Now func() time.Time
	// AdminToken returns the configured admin token, which drain and
	// undrain accept as "Authorization: Bearer TOKEN" instead of a
	// signature; nil or "" accepts signatures only.
	AdminToken func() string
	// Dashboard serves the operator's page at / with GET /v1/dashboard
	// and GET /v1/stream; nil leaves them out.
	Dashboard *Dashboard
}

// NewAdmin returns dnsd's admin HTTP handler: /metrics, /-/healthy,
// /-/ready and POST /-/reload (loopback callers only), plus the groups API
// and the dashboard when configured.
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
	if o.Membership != nil {
		now := o.Now
		if now == nil {
			now = time.Now
		}
		api := &groupsAPI{m: o.Membership, verify: o.Verifier, now: now, token: o.AdminToken}
		api.register(mux)
	}
	if o.Dashboard != nil {
		o.Dashboard.register(mux)
	}
	if o.Explainer != nil {
		mux.HandleFunc("GET /v1/groups/{group}/explain", func(w http.ResponseWriter, r *http.Request) {
			explain(w, r, o.Explainer)
		})
	}
	return mux
}

// explain serves GET /v1/groups/{group}/explain?client=IP[&ecs=PREFIX][&qtype=AAAA].
func explain(w http.ResponseWriter, r *http.Request, ex Explainer) {
	q := r.URL.Query()
	client, err := netip.ParseAddr(q.Get("client"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("client %q: want an IP address", q.Get("client"))})
		return
	}
	var ecs netip.Prefix
	if s := q.Get("ecs"); s != "" {
		if ecs, err = netip.ParsePrefix(s); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("ecs %q: want a prefix such as 198.51.100.0/24", s)})
			return
		}
		ecs = ecs.Masked()
	}
	qtype := dns.TypeA
	switch strings.ToUpper(q.Get("qtype")) {
	case "", "A":
	case "AAAA":
		qtype = dns.TypeAAAA
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("qtype %q: want A or AAAA", q.Get("qtype"))})
		return
	}
	e, err := ex.Explain(r.PathValue("group"), qtype, client, ecs)
	if errors.Is(err, ErrUnknownGroup) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, e)
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
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // error texts keep their "<" and ">"; the type is JSON, not HTML
	_ = enc.Encode(v)
}
