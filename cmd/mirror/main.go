// Command mirror is transmirror's mirror daemon: it serves a document root
// (or fronts a site's back ends), reports its load to dnsd, and corrects
// DNS skew by redirecting requests on the group name to a sibling with
// room when it is over its watermark. With dispatcher: true it serves
// nothing and redirects every request on the group name.
//
// Usage:
//
//	mirror -config mirror.yaml [-listen ADDR]... [-admin ADDR]
//	mirror -check -config mirror.yaml    validate, prepare and exit 0 or 1
//
// -check runs what a start runs before it serves (the config, the
// document root, the GeoIP database, the site front end) and exits: 0 if
// the mirror would start, 1 with the error otherwise.
//
// -listen (repeatable) replaces the config's listen addresses and -admin
// its admin address; port 0 picks a free port, and an admin address
// without a host (":9180") is 127.0.0.1. Once the sockets are open the
// log says, in this order, msg="http listening" addr=HOST:PORT (one per
// public address), msg="admin listening" addr=HOST:PORT tls=BOOL and
// msg="mirror started".
//
// -bench-miss-delay-per-mib DURATION is for benchmarks and tests only: a
// back end's cache miss then sleeps that long per MiB of the file, a
// stand-in for the disk that a test machine's page cache hides (the site
// benchmarks in e2e/benchsite set it). It is not a key of the config, so
// that no production config can carry it.
//
// Signals: SIGINT and SIGTERM stop accepting connections and drain the
// requests in flight for up to timeouts.shutdown. With join on, the
// mirror first leaves the group while it goes on serving: it drains
// itself on every dnsd, waits join.leave_wait (by default the group's
// ttl.max) so that cached answers run out, sends GROUP-EXIT, and only
// then stops its listeners; a stop takes up to leave_wait +
// timeouts.shutdown, and a second SIGINT or SIGTERM cuts the wait short. SIGHUP, and POST
// /-/reload on the admin address (loopback callers only), reload the
// config: it is read and validated again, what can fail is prepared (the
// GeoIP database, the redirect rules, the admin certificate and key),
// then the capacity, the redirect rules, geo, location, host and the
// admin certificate are swapped in at once. A config that is invalid, or
// that changes a key the running mirror can not change (listen, admin,
// admin_tls on or off, limits, group, member, root, backends, site,
// dispatcher, dnsd, timeouts, listing, load_window), is refused with an error naming the
// key, in the log and in the reply, and the old config keeps serving;
// transmirror_mirror_config_last_reload_successful says which happened.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/cmd/internal/daemon"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	config    string
	check     bool
	listen    daemon.ListFlag
	admin     string
	logFormat string
	logLevel  string
	// missDelay is -bench-miss-delay-per-mib (frontend.CacheConfig.MissDelayPerMiB).
	missDelay time.Duration
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("mirror", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "path of the YAML configuration file (required)")
	fs.BoolVar(&o.check, "check", false, "validate the configuration and prepare what a start opens, then exit")
	fs.Var(&o.listen, "listen", "public HTTP listen address host:port (repeatable; replaces the config's)")
	fs.StringVar(&o.admin, "admin", "", "admin HTTP listen address host:port (replaces the config's)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&o.missDelay, "bench-miss-delay-per-mib", 0, "for benchmarks and tests only, never in production: a back end's cache miss sleeps this long per MiB, a stand-in for a disk")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.config == "":
		return o, errors.New("-config FILE is required")
	case o.missDelay < 0:
		return o, fmt.Errorf("-bench-miss-delay-per-mib %s: want >= 0", o.missDelay)
	}
	for _, a := range append(append([]string(nil), o.listen...), o.admin) {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return o, fmt.Errorf("listen address %q: want HOST:PORT", a)
		}
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

// runContext is run until ctx is done; tests cancel ctx instead of
// sending a signal.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "mirror:", err)
		return 2
	}
	logger, err := daemon.NewLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "mirror:", err)
		return 2
	}
	ld := loader{opts: o, logger: logger}
	cfg, err := ld.load()
	if err == nil && os.Geteuid() == 0 {
		// A mistake in root (or a link in it) then exposes every file.
		logger.Warn("mirror: running as root (uid 0): run it as an unprivileged user that can read only what it serves", "root", cfg.Root)
	}
	if err == nil && o.check {
		err = check(cfg, logger)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if o.check {
		fmt.Fprintf(stdout, "%s: ok: member %s of group %s, %s\n", o.config, cfg.Member, cfg.Group, role(cfg))
		return 0
	}
	if err := serve(ctx, ld, cfg, logger); err != nil {
		logger.Error("mirror stopped", "err", err)
		return 1
	}
	return 0
}

// loader reads the config file and applies the command line's listen
// addresses, the same way at start and on every reload; it logs the
// config's warnings (mirror.Config.Warnings) at Warn each time.
type loader struct {
	opts   options
	logger *slog.Logger
}

func (l loader) load() (*mirror.Config, error) {
	cfg, err := mirror.LoadConfig(l.opts.config)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		l.logger.Warn("config warning", "warning", w)
	}
	if len(l.opts.listen) > 0 {
		cfg.Listen = append([]string(nil), l.opts.listen...)
	}
	if l.opts.admin != "" {
		cfg.Admin = l.opts.admin
	}
	cfg.Site.Cache.MissDelayPerMiB = yamlconf.Duration(l.opts.missDelay)
	return cfg, nil
}

// role describes what the mirror serves, for -check.
func role(cfg *mirror.Config) string {
	switch {
	case cfg.Dispatcher:
		return "dispatcher"
	case len(cfg.Backends) > 0:
		return fmt.Sprintf("front end of %d back ends", len(cfg.Backends))
	}
	return "serving " + cfg.Root
}

// joinAndLeave is the Component of the mirror's own membership: it joins
// the group until sig (the signal context) is done, then leaves it
// gracefully (mirror.Joiner.Leave) while the other components go on
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

// check runs exactly a start's build, with private metrics, and releases
// it: it serves nothing and opens no socket.
func check(cfg *mirror.Config, logger *slog.Logger) error {
	_, release, err := build(cfg, logger, prometheus.NewRegistry())
	if err != nil {
		return err
	}
	release()
	return nil
}

func serve(ctx context.Context, ld loader, cfg *mirror.Config, logger *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, release, err := build(cfg, logger, reg)
	if err != nil {
		return err
	}
	defer release()
	var keypair *certs.Keypair // nil: the admin listener is plain HTTP
	if cfg.AdminTLS.Enabled() {
		c, err := certs.Load(cfg.AdminTLS.CertFile, cfg.AdminTLS.KeyFile)
		if err != nil {
			return fmt.Errorf("mirror: admin_tls: %w", err)
		}
		keypair = certs.New(c)
	}
	reloader, err := daemon.NewReloader("mirror", cfg.File, configLoad{ld, m, keypair}.reload, logger, reg)
	if err != nil {
		return err
	}
	refused, err := daemon.Refused("mirror", reg)
	if err != nil {
		return err
	}

	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close() // already closed by Serve when it ran
		}
	}()
	pub, err := listenPublic(cfg, refused, logger)
	lns = append(lns, pub...)
	if err != nil {
		return err
	}
	// With join the listeners outlive the signal: the leave (drain, wait,
	// GROUP-EXIT) runs first, while the mirror still serves, and only then
	// does everything stop and drain its requests.
	serveCtx := ctx
	components := []daemon.Component{m.Run}
	if j := m.Joiner(); j != nil {
		var stopServing context.CancelFunc
		serveCtx, stopServing = context.WithCancel(context.WithoutCancel(ctx))
		defer stopServing()
		components = append(components, joinAndLeave(ctx, j, stopServing, logger))
	}
	for _, ln := range lns {
		components = append(components, func(ctx context.Context) error { return m.Serve(ctx, ln) })
	}
	if cfg.Admin != "" {
		ln, c, err := adminComponent(cfg, m, reloader, refused, keypair, logger)
		if err != nil {
			return err
		}
		lns = append(lns, ln)
		components = append(components, c)
	}
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

// listenPublic opens the public listeners (and the handoff socket of a
// back end of connection handoff) and logs each address; on an error it
// returns those it opened, for the caller to close.
func listenPublic(cfg *mirror.Config, refused *prometheus.CounterVec, logger *slog.Logger) ([]net.Listener, error) {
	var lns []net.Listener
	public := daemon.ListenOptions{
		MaxConnsPerClient: cfg.Limits.MaxConnsPerClient,
		Refused:           refused.WithLabelValues(daemon.ListenerPublic),
	}
	for _, addr := range cfg.Listen {
		ln, err := daemon.Listen(addr, public)
		if err != nil {
			return lns, fmt.Errorf("mirror: listen: %w", err)
		}
		lns = append(lns, ln)
		logger.Info("http listening", "addr", ln.Addr().String())
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
func adminComponent(cfg *mirror.Config, m *mirror.Mirror, reloader *daemon.Reloader, refused *prometheus.CounterVec, keypair *certs.Keypair, logger *slog.Logger) (net.Listener, daemon.Component, error) {
	ln, err := daemon.ListenAdmin(cfg.Admin, daemon.ListenOptions{
		MaxConnsPerClient: cfg.Limits.MaxConnsPerClient,
		Refused:           refused.WithLabelValues(daemon.ListenerAdmin),
		TLS:               keypair,
	}, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: admin: %w", err)
	}
	admin := http.NewServeMux()
	admin.Handle(api.Reload.Pattern(), api.ReloadHandler(reloader.Reload))
	admin.Handle("/", m.AdminHandler())
	hs := daemon.NewAdminServer(api.Guard(admin, cfg.Admin, cfg.AdminHosts, keypair != nil), int(cfg.Limits.MaxHeaderBytes), logger)
	return ln, daemon.ServeHTTP("mirror: admin", ln, hs, daemon.AdminShutdownGrace), nil
}
