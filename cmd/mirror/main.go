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
//	mirror -version                      print the version on one line and exit 0
//
// -version prints the module version, the commit, its time, whether the
// tree was modified and the Go version, as the build recorded them:
// mirror v1.2.3 (commit 0123456789ab, 2026-12-04T21:00:00Z) go1.26.8.
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
// timeouts.shutdown + 32 s (the drain's and the GROUP-EXIT's retries when
// a dnsd does not answer; docs/operating.md), and a second SIGINT or
// SIGTERM cuts the wait short. SIGHUP, and POST
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
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
	"github.com/transmirror/transmirror/cmd/internal/daemon"
	"github.com/transmirror/transmirror/mirror"
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
	// acmeLifetime is -acme-test-lifetime (mirror.ACMEConfig.TestLifetime).
	acmeLifetime time.Duration
	// pprof is -pprof (daemon.Pprof on the admin listener).
	pprof bool
	// version is -version (print buildinfo.Version and exit).
	version bool
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
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go's profiles under /debug/pprof/ on the admin listener, to loopback callers only")
	fs.DurationVar(&o.acmeLifetime, "acme-test-lifetime", 0, "for tests only, never in production: renew the tls.acme certificate as if it lived at most this long (a test CA's live years)")
	buildinfo.Flag(fs, &o.version)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.version:
		return o, nil
	case o.config == "":
		return o, errors.New("-config FILE is required")
	case o.missDelay < 0:
		return o, fmt.Errorf("-bench-miss-delay-per-mib %s: want >= 0", o.missDelay)
	case o.acmeLifetime < 0:
		return o, fmt.Errorf("-acme-test-lifetime %s: want >= 0", o.acmeLifetime)
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
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintln(stderr, "mirror:", err)
		return 2
	case o.version:
		fmt.Fprintln(stdout, buildinfo.Version("mirror"))
		return 0
	}
	logger, err := daemon.NewLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "mirror:", err)
		return 2
	}
	ld := loader{file: o.config, listen: o.listen, admin: o.admin, missDelay: o.missDelay, acmeLifetime: o.acmeLifetime, pprof: o.pprof, logger: logger}
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
	if err := runMirror(ctx, ld, cfg, logger); err != nil {
		logger.Error("mirror stopped", "err", err)
		return 1
	}
	return 0
}

// check runs exactly a start's build, with private metrics, and releases
// it: it serves nothing and opens no socket.
func check(cfg *mirror.Config, logger *slog.Logger) error {
	d, err := processDeps(cfg, logger, prometheus.NewRegistry())
	if err != nil {
		return err
	}
	m, err := build(cfg, d)
	if err != nil {
		return err
	}
	return m.release()
}
