package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

// setLoader is what the reloader needs: prepare and swap in a new Set.
type setLoader interface{ Load(*zones.Set) error }

// configLoad loads a config Set into the controller (which also gives the
// watcher the new health settings), then sets what the controller does not
// own: the admin API's signature window.
type configLoad struct {
	ctl      *dnsd.Controller
	verifier *probe.Verifier
}

func (l configLoad) Load(set *zones.Set) error {
	if err := l.ctl.Load(set); err != nil {
		return err
	}
	l.verifier.SetWindow(set.Config.Health.SignatureWindow.D())
	return nil
}

// reloader is load → validate → build → swap; on any error the old
// snapshot keeps serving and the error goes back to whoever asked.
type reloader struct {
	ld     *loader
	srv    setLoader
	logger *slog.Logger

	mu sync.Mutex // one reload at a time

	ok      prometheus.Gauge
	okTime  prometheus.Gauge
	reloads *prometheus.CounterVec
}

func newReloader(ld *loader, srv setLoader, logger *slog.Logger, reg prometheus.Registerer) *reloader {
	r := &reloader{
		ld: ld, srv: srv, logger: logger,
		ok: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: "dnsd", Name: "config_last_reload_successful",
			Help: "Whether the last configuration reload succeeded (1) or failed (0).",
		}),
		okTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: "dnsd", Name: "config_last_reload_success_timestamp_seconds",
			Help: "Time of the last successful configuration load, in seconds since the epoch.",
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "transmirror", Subsystem: "dnsd", Name: "config_reloads_total",
			Help: "Configuration reloads by result (success, failure).",
		}, []string{"result"}),
	}
	reg.MustRegister(r.ok, r.okTime, r.reloads)
	r.ok.Set(1)
	r.okTime.SetToCurrentTime()
	r.reloads.WithLabelValues("success")
	r.reloads.WithLabelValues("failure")
	return r
}

// Reload loads and validates the configuration again and swaps it in.
func (r *reloader) Reload(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	set, err := r.ld.load()
	if err == nil {
		err = r.srv.Load(set)
	}
	if err != nil {
		r.ok.Set(0)
		r.reloads.WithLabelValues("failure").Inc()
		r.logger.Error("reload failed, old configuration keeps serving", "config", r.ld.name(), "err", err)
		return err
	}
	r.ok.Set(1)
	r.okTime.SetToCurrentTime()
	r.reloads.WithLabelValues("success").Inc()
	r.logger.Info("reloaded", "config", r.ld.name(), "zones", len(set.Zones), "groups", len(set.Groups),
		"duration_seconds", time.Since(start).Seconds())
	return nil
}
