package mirror

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler/site"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// Paths of the status page on the admin server; its JSON is at
// api.MirrorStatus.
const (
	// StatusPagePath is the HTML status page.
	StatusPagePath = "/"
	// statusCSSPath is the page's style sheet.
	statusCSSPath = "/status.css"
)

// statusPatterns are the mux patterns of the status handler: the page, its
// style sheet and its JSON (what NewAdminHandler sends to it).
func statusPatterns() []string {
	return []string{"GET " + StatusPagePath + "{$}", "GET " + statusCSSPath, api.MirrorStatus.Pattern()}
}

// statusCSP allows the page nothing but its own style sheet: it has no
// script (a meta refresh reloads it) and loads nothing from elsewhere.
const statusCSP = "default-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed web/status.html web/status.css
var statusFiles embed.FS

// StatusSource gives a mirror's status at a time; *Mirror is one.
type StatusSource interface {
	Status(now time.Time) Status
}

var _ StatusSource = (*Mirror)(nil)

// statusHandler serves the status page, its style sheet and its JSON.
type statusHandler struct {
	src  StatusSource
	now  func() time.Time
	page *template.Template
	css  []byte
	mux  *http.ServeMux
}

// NewStatusHandler returns the handler of the status page: GET / (HTML,
// reloading itself every 2 s), GET /status.css and api.MirrorStatus (the
// same Status as JSON), taken from src at clock's time (default
// time.Now). It is read-only; names are HTML-escaped.
func NewStatusHandler(src StatusSource, clock func() time.Time) (http.Handler, error) {
	if clock == nil {
		clock = time.Now
	}
	page, err := template.New("status.html").Funcs(statusFuncs()).ParseFS(statusFiles, "web/status.html")
	if err != nil {
		return nil, fmt.Errorf("mirror: status page: %w", err)
	}
	css, err := statusFiles.ReadFile("web/status.css")
	if err != nil {
		return nil, fmt.Errorf("mirror: status page: %w", err)
	}
	h := &statusHandler{src: src, now: clock, page: page, css: css, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET "+StatusPagePath+"{$}", h.serveHTML)
	h.mux.HandleFunc(api.MirrorStatus.Pattern(), h.serveJSON)
	h.mux.HandleFunc("GET "+statusCSSPath, h.serveCSS)
	return h, nil
}

// ServeHTTP routes to the page, the JSON or the style sheet.
func (h *statusHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// statusHeaders sets the headers every status response has.
func statusHeaders(w http.ResponseWriter, contentType string) {
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
}

func (h *statusHandler) serveHTML(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	if err := h.page.Execute(&buf, h.src.Status(h.now())); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	statusHeaders(w, "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", statusCSP)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

func (h *statusHandler) serveJSON(w http.ResponseWriter, _ *http.Request) {
	b, err := json.Marshal(h.src.Status(h.now()))
	if err != nil {
		http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
		return
	}
	b = append(b, '\n')
	statusHeaders(w, "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (h *statusHandler) serveCSS(w http.ResponseWriter, _ *http.Request) {
	statusHeaders(w, "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=300")
	w.Header().Set("Content-Length", strconv.Itoa(len(h.css)))
	_, _ = w.Write(h.css)
}

// statusFuncs returns the functions that format the page's figures.
func statusFuncs() template.FuncMap {
	return template.FuncMap{
		"f":     func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
		"pct":   func(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + " %" },
		"bytes": humanBytes,
		// bandwidth writes bytes per second as the config does: 1Gbit/s.
		"bandwidth": func(v float64) string { return yamlconf.Bandwidth(v).String() },
		"secs":      humanSeconds,
		"rfc":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"cacheOf":   cacheOf,
		// until is the seconds from now to t (negative once past).
		"until": func(now, t time.Time) float64 { return t.Sub(now).Seconds() },
	}
}

// humanBytes formats an int64, uint64 or float64 count of bytes with a
// binary prefix: "512 B", "1.5 KiB", "3.0 GiB".
func humanBytes(v any) string {
	var n float64
	switch x := v.(type) {
	case int64:
		n = float64(x)
	case uint64:
		n = float64(x)
	case int:
		n = float64(x)
	case float64:
		n = x
	default:
		return fmt.Sprint(v)
	}
	if math.Abs(n) < 1024 {
		return strconv.FormatFloat(n, 'f', 0, 64) + " B"
	}
	const units = "KMGTPE"
	i := -1
	for math.Abs(n) >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return strconv.FormatFloat(n, 'f', 1, 64) + " " + units[i:i+1] + "iB"
}

// humanSeconds formats seconds as a duration rounded to what matters:
// tenths of a second below a minute, seconds below an hour, minutes above.
func humanSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// cacheOf returns the tb-ccrd cache model of the back end called name,
// nil when there is none.
func cacheOf(caches []site.CacheModelStats, name string) *site.CacheModelStats {
	for i := range caches {
		if caches[i].Backend == name {
			return &caches[i]
		}
	}
	return nil
}
