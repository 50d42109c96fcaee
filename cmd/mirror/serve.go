package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/cmd/internal/daemon"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/probe/api"
)

// runMirror builds the mirror of cfg and serves it until ctx is done: the
// flat list of its components (its loops, the join, one per listener, the
// admin server) under one context, with the reload on SIGHUP.
func runMirror(ctx context.Context, ld loader, cfg *mirror.Config, logger *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector("mirror"))
	d, err := processDeps(cfg, logger, reg)
	if err != nil {
		return err
	}
	m, err := build(cfg, d)
	if err != nil {
		return err
	}
	defer m.release()
	keypair, err := adminKeypair(cfg)
	if err != nil {
		return err
	}
	reloader, err := daemon.NewReloader("mirror", cfg.File, configLoad{ld, m.Mirror, keypair, m.tls}.reload, logger, reg)
	if err != nil {
		return err
	}
	refused, err := daemon.Refused("mirror", reg)
	if err != nil {
		return err
	}

	lns, serving, err := openListeners(cfg, m, reloader, refused, keypair, logger)
	defer func() {
		for _, ln := range lns {
			ln.Close() // already closed by Serve when it ran
		}
	}()
	if err != nil {
		return err
	}
	serveCtx, stopServing, join := joined(ctx, m.joiner, logger)
	defer stopServing()
	components := slices.Concat(m.loops, join, serving)
	// SIGHUP is caught before "mirror started" tells anyone that they may
	// send it; without a handler it would kill the process.
	started := func() {
		logger.Info("mirror started", "group", cfg.Group, "member", cfg.Member, "role", role(cfg))
	}
	if err := daemon.Run(serveCtx, reloader.Reload, started, components...); err != nil {
		return err
	}
	logger.Info("mirror stopped")
	return nil
}

// joined returns the context that the components serve under, with its
// cancel, and the Component of the join (none without join). With join the
// listeners outlive sig, the signal context: the leave (drain, wait,
// GROUP-EXIT) runs first, while the mirror still serves, and only then
// does everything stop and drain its requests.
func joined(sig context.Context, j *group.Joiner, logger *slog.Logger) (context.Context, context.CancelFunc, []daemon.Component) {
	if j == nil {
		return sig, func() {}, nil
	}
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(sig))
	return serveCtx, stopServing, []daemon.Component{joinAndLeave(sig, j, stopServing, logger)}
}

// joinAndLeave is the Component of the mirror's own membership: it joins
// the group until sig (the signal context) is done, then leaves it
// gracefully (group.Joiner.Leave) while the other components go on
// serving, and then calls stopServing. A second SIGINT or SIGTERM cuts
// the leave's wait short. When another component fails first (ctx done,
// not sig) the mirror leaves without waiting: it is about to stop serving.
func joinAndLeave(sig context.Context, j *group.Joiner, stopServing func(), logger *slog.Logger) daemon.Component {
	return func(ctx context.Context) error {
		defer stopServing()
		jctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(sig, cancel)()
		_ = j.Run(jctx) // retries and logs by itself

		lctx, lcancel := context.WithCancel(context.WithoutCancel(ctx))
		defer lcancel()
		if ctx.Err() != nil {
			lcancel() // a failure, not a signal: no wait
		}
		again := make(chan os.Signal, 1)
		signal.Notify(again, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(again)
		go func() {
			select {
			case <-again:
				logger.Warn("second signal: leaving the group without waiting")
				lcancel()
			case <-lctx.Done():
			}
		}()
		if err := j.Leave(lctx); err != nil {
			logger.Error("leaving the group", "err", err)
		}
		return nil
	}
}

// adminKeypair loads the admin listener's certificate and key (admin_tls);
// nil without admin_tls: the admin listener is plain HTTP.
func adminKeypair(cfg *mirror.Config) (*certs.Keypair, error) {
	if !cfg.AdminTLS.Enabled() {
		return nil, nil
	}
	c, err := certs.Load(cfg.AdminTLS.CertFile, cfg.AdminTLS.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("mirror: admin_tls: %w", err)
	}
	return certs.New(c), nil
}

// openListeners opens the public listeners and the admin listener and returns
// them, for the caller to close even on an error, with the Components
// that serve them: m's public server on each public one, its admin
// handler and the reload endpoint on the admin one.
func openListeners(cfg *mirror.Config, m *wired, reloader *daemon.Reloader, refused *prometheus.CounterVec, keypair *certs.Keypair, logger *slog.Logger) ([]net.Listener, []daemon.Component, error) {
	lns, err := listenPublic(cfg, refused, m.proxyProtocol, m.httpsConfig(), logger)
	if err != nil {
		return lns, nil, err
	}
	var cs []daemon.Component
	for _, ln := range lns {
		cs = append(cs, func(ctx context.Context) error { return m.public.Serve(ctx, ln) })
	}
	if cfg.Admin == "" {
		return lns, cs, nil
	}
	ln, c, err := adminComponent(cfg, m.admin, reloader, refused, keypair, logger)
	if err != nil {
		return lns, nil, err
	}
	return append(lns, ln), append(cs, c), nil
}

// listenPublic opens the public listeners, plain HTTP and HTTPS (TLS on
// httpsConf; connections capped per client below TLS), each wrapped by
// wrap beneath the cap and TLS (the PROXY protocol; nil: none), and the
// handoff socket of a back end of connection handoff, and logs each
// address; on an error it returns those it opened, for the caller to
// close.
func listenPublic(cfg *mirror.Config, refused *prometheus.CounterVec, wrap func(net.Listener) net.Listener, httpsConf *tls.Config, logger *slog.Logger) ([]net.Listener, error) {
	var lns []net.Listener
	public := daemon.ListenOptions{
		MaxConnsPerClient: cfg.Limits.MaxConnsPerClient,
		Refused:           refused.WithLabelValues(daemon.ListenerPublic),
		Wrap:              wrap,
	}
	for _, addr := range cfg.Listen {
		ln, err := daemon.Listen(addr, public)
		if err != nil {
			return lns, fmt.Errorf("mirror: listen: %w", err)
		}
		lns = append(lns, ln)
		logger.Info("http listening", "addr", ln.Addr().String())
	}
	for _, addr := range cfg.TLS.Listen {
		ln, err := daemon.Listen(addr, public)
		if err != nil {
			return lns, fmt.Errorf("mirror: tls.listen: %w", err)
		}
		lns = append(lns, tls.NewListener(ln, httpsConf))
		logger.Info("https listening", "addr", ln.Addr().String())
	}
	if cfg.Site.HandoffSocket != "" {
		// The back-end role of connection handoff: a front end on this host
		// passes accepted client connections over this socket.
		ln, err := frontend.ListenHandoff(cfg.Site.HandoffSocket)
		if err != nil {
			return lns, fmt.Errorf("mirror: %w", err)
		}
		lns = append(lns, ln)
		logger.Info("handoff listening", "socket", cfg.Site.HandoffSocket)
	}
	return lns, nil
}

// adminComponent opens the admin listener and returns it with the
// Component that serves the mirror's admin handler and the reload
// endpoint on it.
func adminComponent(cfg *mirror.Config, admin http.Handler, reloader *daemon.Reloader, refused *prometheus.CounterVec, keypair *certs.Keypair, logger *slog.Logger) (net.Listener, daemon.Component, error) {
	ln, err := daemon.ListenAdmin(cfg.Admin, daemon.ListenOptions{
		MaxConnsPerClient: cfg.Limits.MaxConnsPerClient,
		Refused:           refused.WithLabelValues(daemon.ListenerAdmin),
		TLS:               keypair,
	}, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: admin: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(api.Reload.Pattern(), api.ReloadHandler(reloader.Reload))
	mux.Handle("/", admin)
	hs := daemon.NewAdminServer(api.Guard(daemon.Pprof(mux, cfg.Pprof), cfg.Admin, cfg.AdminHosts, keypair != nil), int(cfg.Limits.MaxHeaderBytes), logger)
	return ln, daemon.ServeHTTP("mirror: admin", ln, hs, daemon.AdminShutdownGrace), nil
}
