package mirror

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
)

// AdminOptions configure NewAdminHandler.
type AdminOptions struct {
	// Reporter serves api.LoadReport (required).
	Reporter *probe.Reporter
	// Gatherer serves api.Metrics; nil answers 404 there.
	Gatherer prometheus.Gatherer
	// Logger receives errors of the metrics handler (default: discard).
	Logger *slog.Logger
	// Status, when set, serves the status page: GET / (HTML),
	// GET /status.css and api.MirrorStatus (JSON); see NewStatusHandler.
	Status http.Handler
	// SiteReport, when set, serves api.SiteReport (a back end's report to
	// its site front end).
	SiteReport http.Handler
	// ContentIndex, when set, serves api.ContentIndex (the content
	// package's Handler).
	ContentIndex http.Handler
	// Serving, when set and false, makes api.LoadReport and api.Healthy
	// answer 503 (a site front end with no back end up, SiteServing).
	Serving func() bool
}

// NewAdminHandler returns the admin server's handler: api.LoadReport (the
// load report, LOAD-QUERY), api.Metrics, api.Healthy and, with o.Status,
// the status page (GET /, GET /status.css, api.MirrorStatus) and, with
// o.ContentIndex, api.ContentIndex.
func NewAdminHandler(o AdminOptions) http.Handler {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	var report http.Handler = o.Reporter
	if o.Serving != nil {
		report = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !o.Serving() {
				http.Error(w, group.ErrNotServing.Error(), http.StatusServiceUnavailable)
				return
			}
			o.Reporter.ServeHTTP(w, r)
		})
	}
	mux.Handle(api.LoadReport.Pattern(), report)
	if o.Gatherer != nil {
		mux.Handle(api.Metrics.Pattern(), promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError),
		}))
	}
	if o.SiteReport != nil {
		mux.Handle(api.SiteReport.Pattern(), o.SiteReport)
	}
	if o.ContentIndex != nil {
		mux.Handle(api.ContentIndex.Pattern(), o.ContentIndex)
	}
	if o.Status != nil {
		for _, p := range statusPatterns() {
			mux.Handle(p, o.Status)
		}
	}
	mux.HandleFunc(api.Healthy.Pattern(), func(w http.ResponseWriter, _ *http.Request) {
		writeHealth(w, o.Serving, "OK\n")
	})
	return mux
}
