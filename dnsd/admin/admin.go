package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"

	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/transmirror/transmirror/dnsd"
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

// Options configures the admin HTTP handler.
type Options struct {
	Logger   *slog.Logger
	Gatherer prometheus.Gatherer
	// Reloader serves api.Reload (loopback callers only); nil serves no
	// reload route.
	Reloader  Reloader
	Explainer Explainer
	// Membership serves the groups API (api.ListGroups to
	// api.UndrainMember); nil leaves it out.
	Membership Membership
	// Reports takes the pushed load and redirect reports; nil leaves
	// their routes (api.PushLoad, api.PushRedirects) out.
	Reports Reports
	// Verifier checks signed writes (required with Membership).
	Verifier *api.Verifier
	// SignedRequests counts the signed writes accepted by the secret that
	// signed them (NewSignedRequests); nil counts nothing.
	SignedRequests *prometheus.CounterVec
	// SignedRefused counts the writes refused before they are looked at
	// by route and reason (NewSignedRefused); nil counts nothing. They
	// are logged at Warn with Logger, rate-limited, either way.
	SignedRefused *prometheus.CounterVec
	// Now is the clock for signatures; nil means time.Now.
	Now func() time.Time
	// AdminToken returns the configured admin token, which drain and
	// undrain accept as "Authorization: Bearer TOKEN" instead of a
	// signature; nil or "" accepts signatures only.
	AdminToken func() string
	// Contents serves api.GroupWhere and api.GroupMirrorList with
	// Membership (the mirror list ordered by Explainer when set); nil
	// leaves them out.
	Contents Contents
	// Challenges serves the ACME DNS-01 challenge routes
	// (api.PublishChallenge to api.ListChallenges) with Membership; nil
	// leaves them out.
	Challenges Challenges
	// Dashboard serves the operator's page at / with api.Dashboard and
	// api.Stream; nil leaves them out.
	Dashboard *Dashboard
}

// NewHandler returns dnsd's admin HTTP handler: api.Metrics, api.Healthy,
// api.Ready and api.Reload (loopback callers only), plus the groups API,
// api.ExplainGroup and the dashboard when configured.
func NewHandler(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(api.Metrics.Pattern(), promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)}))
	mux.HandleFunc(api.Healthy.Pattern(), func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.StatusReply{Status: "ok"})
	})
	mux.HandleFunc(api.Ready.Pattern(), func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.StatusReply{Status: "ready"})
	})
	if o.Reloader != nil {
		mux.Handle(api.Reload.Pattern(), api.ReloadHandler(o.Reloader.Reload))
	}
	if o.Membership != nil {
		now := o.Now
		if now == nil {
			now = time.Now
		}
		api := &groupsAPI{m: o.Membership, in: o.Reports, verify: o.Verifier, now: now, token: o.AdminToken, signedWith: o.SignedRequests,
			refused: newRefusals(o.SignedRefused, o.Logger, now)}
		api.register(mux)
		if o.Challenges != nil {
			api.registerChallenges(mux, o.Challenges)
		}
		if o.Contents != nil {
			(&whereAPI{m: o.Membership, c: o.Contents, ex: o.Explainer, now: now}).register(mux)
		}
	}
	if o.Dashboard != nil {
		o.Dashboard.register(mux)
	}
	if o.Explainer != nil {
		mux.HandleFunc(api.ExplainGroup.Pattern(), func(w http.ResponseWriter, r *http.Request) {
			explain(w, r, o.Explainer, o.Membership)
		})
	}
	return mux
}

// explain serves api.ExplainGroup: the query is an api.ExplainQuery.
// With m (nil: none), it adds what each member serves and the filter of
// a mirror's redirect for the client.
func explain(w http.ResponseWriter, r *http.Request, ex Explainer, m Membership) {
	q := r.URL.Query()
	client, err := netip.ParseAddr(q.Get(api.ClientParam))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, api.ErrorReply{Error: fmt.Sprintf("client %q: want an IP address", q.Get(api.ClientParam))})
		return
	}
	var ecs netip.Prefix
	if s := q.Get(api.ECSParam); s != "" {
		if ecs, err = netip.ParsePrefix(s); err != nil {
			writeJSON(w, http.StatusBadRequest, api.ErrorReply{Error: fmt.Sprintf("ecs %q: want a prefix such as 198.51.100.0/24", s)})
			return
		}
		ecs = ecs.Masked()
	}
	qtype := dns.TypeA
	switch strings.ToUpper(q.Get(api.QtypeParam)) {
	case "", "A":
	case "AAAA":
		qtype = dns.TypeAAAA
	default:
		writeJSON(w, http.StatusBadRequest, api.ErrorReply{Error: fmt.Sprintf("qtype %q: want A or AAAA", q.Get(api.QtypeParam))})
		return
	}
	e, err := ex.Explain(r.PathValue(api.GroupParam), qtype, client, ecs)
	if errors.Is(err, dnsd.ErrUnknownGroup) {
		writeJSON(w, http.StatusNotFound, api.ErrorReply{Error: err.Error()})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, api.ErrorReply{Error: err.Error()})
		return
	}
	if m != nil {
		if v, err := m.View(e.Group); err == nil {
			withRedirects(&e, v, client)
		}
	}
	writeJSON(w, http.StatusOK, e)
}

// withRedirects adds to e what each member of view v serves and the
// filter of a mirror's redirect for client.
func withRedirects(e *api.Explanation, v api.GroupView, client netip.Addr) {
	e.Redirects = api.FilterOf(v, client)
	serves := make(map[string][]string, len(v.Members))
	for _, m := range v.Members {
		serves[m.Name] = api.OffersOf(m).Strings()
	}
	for i := range e.Members {
		e.Members[i].Serves = serves[e.Members[i].Name]
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // error texts keep their "<" and ">"; the type is JSON, not HTML
	_ = enc.Encode(v)
}
