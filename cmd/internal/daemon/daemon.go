// Package daemon is the skeleton that dnsd and mirror share: the logger
// from flags, a repeatable flag, the reload discipline with its metrics,
// the POST /-/reload handler (loopback callers only), an HTTP server that
// drains on shutdown, and Run, which runs a flat list of components under
// one context with SIGHUP wired to the reload.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

// ListFlag is a repeatable string flag.
type ListFlag []string

// String joins the values with commas.
func (l *ListFlag) String() string { return strings.Join(*l, ",") }

// Set appends v.
func (l *ListFlag) Set(v string) error { *l = append(*l, v); return nil }

// NewLogger returns the logger that -log-format (text or json) and
// -log-level (debug, info, warn or error) ask for, writing to w.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	ho := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want text or json", format)
}

// Reloader is load → validate → build → swap, one at a time, with its
// outcome logged and exported as transmirror_<daemon>_config_*; on any
// error the old configuration keeps serving and the error goes back to
// whoever asked (SIGHUP: the log; POST /-/reload: the response body).
type Reloader struct {
	name   string // the config file, for the log
	load   func() (summary []any, err error)
	logger *slog.Logger

	mu sync.Mutex // one reload at a time

	ok      prometheus.Gauge
	okTime  prometheus.Gauge
	reloads *prometheus.CounterVec
}

// NewReloader returns the Reloader of daemon ("dnsd", "mirror") whose
// config is called name. load does the whole reload and returns key/value
// pairs that describe what now serves, for the log line. The metrics are
// registered with reg; the first load (the start) counts as a success.
func NewReloader(daemon, name string, load func() ([]any, error), logger *slog.Logger, reg prometheus.Registerer) (*Reloader, error) {
	r := &Reloader{
		name: name, load: load, logger: logger,
		ok: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: daemon, Name: "config_last_reload_successful",
			Help: "Whether the last configuration reload succeeded (1) or failed (0).",
		}),
		okTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: daemon, Name: "config_last_reload_success_timestamp_seconds",
			Help: "Time of the last successful configuration load, in seconds since the epoch.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "transmirror", Subsystem: daemon, Name: "config_reloads_total",
			Help: "Configuration reloads by result (success, failure).",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{r.ok, r.okTime, r.reloads} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("%s: register reload metrics: %w", daemon, err)
		}
	}
	r.ok.Set(1)
	r.okTime.SetToCurrentTime()
	r.reloads.WithLabelValues("success")
	r.reloads.WithLabelValues("failure")
	return r, nil
}

// Reload loads the configuration again and swaps it in.
func (r *Reloader) Reload(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	summary, err := r.load()
	if err != nil {
		r.ok.Set(0)
		r.reloads.WithLabelValues("failure").Inc()
		r.logger.Error("reload failed, old configuration keeps serving", "config", r.name, "err", err)
		return err
	}
	r.ok.Set(1)
	r.okTime.SetToCurrentTime()
	r.reloads.WithLabelValues("success").Inc()
	r.logger.Info("reloaded", append([]any{"config", r.name}, append(summary, "duration_seconds", time.Since(start).Seconds())...)...)
	return nil
}

// Component is one part of a daemon: it runs until ctx is done, then
// drains and returns.
type Component func(ctx context.Context) error

// Run runs every component under one context until ctx is done or one
// fails, and calls reload on every SIGHUP meanwhile (its error is logged
// by the reloader). SIGHUP is caught before Run returns control, so a
// caller may announce "started" right after calling it in a goroutine;
// ready, when not nil, is called once the handler is in place.
func Run(ctx context.Context, reload func(context.Context) error, ready func(), components ...Component) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range components {
		g.Go(func() error { return c(gctx) })
	}
	g.Go(func() error {
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-hup:
				if reload != nil {
					_ = reload(gctx)
				}
			}
		}
	})
	if ready != nil {
		ready()
	}
	return g.Wait()
}

// ServeHTTP returns the Component that serves h on ln with the given
// server settings until ctx is done, then shuts the server down on a fresh
// context bounded by grace, draining the requests in flight.
func ServeHTTP(name string, ln net.Listener, hs *http.Server, grace time.Duration) Component {
	return func(ctx context.Context) error {
		errc := make(chan error, 1)
		go func() { errc <- hs.Serve(ln) }()
		select {
		case err := <-errc:
			return fmt.Errorf("%s: %w", name, err)
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
		defer cancel()
		err := hs.Shutdown(sctx)
		if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("%s: shutdown: %w", name, err)
		}
		return nil
	}
}
