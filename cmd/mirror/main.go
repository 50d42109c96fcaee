// Command mirror is transmirror's mirror daemon: it serves a document root
// (or fronts a site's back ends), reports its load to dnsd, and corrects
// DNS skew by redirecting requests on the group name to a sibling with
// room when it is over its watermark. With dispatcher: true it serves
// nothing and redirects every request on the group name.
//
// Usage:
//
//	mirror -config mirror.yaml [-listen ADDR]... [-admin ADDR]
//	mirror -check -config mirror.yaml    validate and exit 0 or 1
//
// -listen (repeatable) replaces the config's listen addresses and -admin
// its admin address; port 0 picks a free port. Once the sockets are open
// the log says, in this order, msg="http listening" addr=HOST:PORT (one
// per public address), msg="admin listening" addr=HOST:PORT and
// msg="mirror started".
//
// Signals: SIGINT and SIGTERM stop accepting connections and drain the
// requests in flight for up to timeouts.shutdown. SIGHUP does not reload
// yet: it is logged and ignored (the process keeps running with the
// config it started with); restart the mirror to apply a new config.
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
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/transmirror/transmirror/mirror"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	config    string
	check     bool
	listen    listFlag
	admin     string
	logFormat string
	logLevel  string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("mirror", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "path of the YAML configuration file (required)")
	fs.BoolVar(&o.check, "check", false, "validate the configuration, then exit")
	fs.Var(&o.listen, "listen", "public HTTP listen address host:port (repeatable; replaces the config's)")
	fs.StringVar(&o.admin, "admin", "", "admin HTTP listen address host:port (replaces the config's)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.config == "":
		return o, errors.New("-config FILE is required")
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

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
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
	logger, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "mirror:", err)
		return 2
	}
	cfg, err := mirror.LoadConfig(o.config)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if len(o.listen) > 0 {
		cfg.Listen = append([]string(nil), o.listen...)
	}
	if o.admin != "" {
		cfg.Admin = o.admin
	}
	if o.check {
		fmt.Fprintf(stdout, "%s: ok: member %s of group %s, %s\n", o.config, cfg.Member, cfg.Group, role(cfg))
		return 0
	}
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("mirror stopped", "err", err)
		return 1
	}
	return 0
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

func serve(ctx context.Context, cfg *mirror.Config, logger *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	var content http.Handler
	if len(cfg.Backends) > 0 {
		h, closer, err := mirror.NewSiteHandler(cfg, mirror.SiteOptions{Logger: logger, Registerer: reg})
		if err != nil {
			return err
		}
		defer closer.Close()
		content = h
	}
	m, err := mirror.New(cfg, mirror.Options{Logger: logger, Registry: reg, Content: content, ReportWindow: cfg.LoadWindow.D()})
	if err != nil {
		return err
	}
	defer m.Close()

	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close() // already closed by Serve when it ran
		}
	}()
	for _, addr := range cfg.Listen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("mirror: listen: %w", err)
		}
		lns = append(lns, ln)
		logger.Info("http listening", "addr", ln.Addr().String())
	}
	nPublic := len(lns)
	if cfg.Site.HandoffSocket != "" {
		// The back-end role of connection handoff: a front end on this host
		// passes accepted client connections over this socket.
		ln, err := mirror.ListenHandoff(cfg.Site.HandoffSocket)
		if err != nil {
			return fmt.Errorf("mirror: handoff: %w", err)
		}
		lns = append(lns, ln)
		nPublic++
		logger.Info("handoff listening", "socket", cfg.Site.HandoffSocket)
	}
	var adminLn net.Listener
	if cfg.Admin != "" {
		if adminLn, err = net.Listen("tcp", cfg.Admin); err != nil {
			return fmt.Errorf("mirror: admin: %w", err)
		}
		lns = append(lns, adminLn)
		logger.Info("admin listening", "addr", adminLn.Addr().String())
	}

	// SIGHUP is caught from here on, before "mirror started" tells anyone
	// that they may send it; without a handler it would kill the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return m.Run(gctx) })
	for _, ln := range lns[:nPublic] {
		g.Go(func() error { return m.Serve(gctx, ln) })
	}
	if adminLn != nil {
		g.Go(func() error { return m.ServeAdmin(gctx, adminLn) })
	}
	g.Go(func() error {
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-hup:
				logger.Warn("SIGHUP: reload is not supported yet; restart the mirror to apply a new config", "config", cfg.File)
			}
		}
	})
	logger.Info("mirror started", "group", cfg.Group, "member", cfg.Member, "role", role(cfg))
	if err := g.Wait(); err != nil {
		return err
	}
	logger.Info("mirror stopped")
	return nil
}
