// Command dnsd is transmirror's authoritative DNS server: it serves RFC 1035
// zone files and answers mirror group names with the members that suit each
// client.
//
// Usage:
//
//	dnsd -config dnsd.yaml            serve a configuration
//	dnsd -check -config dnsd.yaml     validate it and exit 0 or 1
//	dnsd -ds -config dnsd.yaml        print the DS records for the parent zones
//	dnsd -listen 127.0.0.1:5300 -zone example.test=example.test.zone
//	                                  serve plain zone files, no config file
//	dnsd -demo                        serve the embedded demo zone
//	dnsd -version                     print the version on one line and exit 0
//
// The -version line is the module version, the commit, its time, whether
// the tree was modified and the Go version, as the build recorded them:
//
//	dnsd v1.2.3 (commit 0123456789ab, 2026-12-04T21:00:00Z, modified) go1.26.8
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
	"github.com/transmirror/transmirror/cmd/internal/daemon"
	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/zones"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	config    string
	check     bool
	ds        bool
	demo      bool
	listen    daemon.ListFlag
	zones     daemon.ListFlag
	admin     string
	logFormat string
	logLevel  string
	pprof     bool // -pprof: daemon.Pprof on the admin listener
	version   bool // -version: print buildinfo.Version and exit
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("dnsd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "path of the YAML configuration file")
	fs.BoolVar(&o.check, "check", false, "validate the configuration and zone files, then exit")
	fs.BoolVar(&o.ds, "ds", false, "print the DS records of the signed zones' KSKs (SHA-256) for their parents, then exit")
	fs.BoolVar(&o.demo, "demo", false, "serve the embedded demo configuration")
	fs.Var(&o.listen, "listen", "DNS listen address host:port, UDP and TCP (repeatable; overrides the config)")
	fs.Var(&o.zones, "zone", "serve ORIGIN=FILE without a config file (repeatable; AXFR allowed from loopback)")
	fs.StringVar(&o.admin, "admin", "", "admin HTTP listen address (overrides the config)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&o.pprof, "pprof", false, "serve Go's profiles under /debug/pprof/ on the admin listener, to loopback callers only")
	buildinfo.Flag(fs, &o.version)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.version {
		return o, nil
	}
	modes := 0
	for _, on := range []bool{o.config != "", len(o.zones) > 0, o.demo} {
		if on {
			modes++
		}
	}
	if modes != 1 {
		return o, errors.New("give exactly one of -config FILE, -zone ORIGIN=FILE (repeatable) or -demo")
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
		fmt.Fprintln(stderr, "dnsd:", err)
		return 2
	case o.version:
		fmt.Fprintln(stdout, buildinfo.Version("dnsd"))
		return 0
	}
	logger, err := daemon.NewLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "dnsd:", err)
		return 2
	}
	if o.demo {
		dir, err := os.MkdirTemp("", "dnsd-demo-")
		if err != nil {
			fmt.Fprintln(stderr, "dnsd:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if o.config, err = writeDemo(dir); err != nil {
			fmt.Fprintln(stderr, "dnsd:", err)
			return 1
		}
	}
	ld := &loader{opts: o, logger: logger}
	set, err := ld.load()
	if err == nil && o.check {
		err = check(set, logger)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if o.check {
		fmt.Fprintf(stdout, "%s: ok: %d zones, %d groups\n", ld.name(), len(set.Zones), len(set.Groups))
		return 0
	}
	if o.ds {
		return printDS(set, stdout, stderr)
	}

	if err := serve(ctx, ld, set, logger, stdout, o.demo); err != nil {
		logger.Error("dnsd stopped", "err", err)
		return 1
	}
	return 0
}

// loader turns the command line into a validated zones.Set, the same way at
// start and on every reload; it logs the set's warnings (zones.Set.Warnings)
// at Warn each time.
type loader struct {
	opts   options
	logger *slog.Logger
}

func (l *loader) name() string {
	if l.opts.config != "" {
		return l.opts.config
	}
	return "flags"
}

func (l *loader) load() (*zones.Set, error) {
	var (
		cfg *zones.Config
		err error
	)
	if l.opts.config != "" {
		data, rerr := os.ReadFile(l.opts.config)
		if rerr != nil {
			return nil, fmt.Errorf("dnsd: %w", rerr)
		}
		cfg, err = zones.Parse(l.opts.config, data)
	} else {
		cfg, err = zones.FromFlags(l.opts.listen, l.opts.zones)
	}
	if err != nil {
		return nil, err
	}
	if len(l.opts.listen) > 0 {
		cfg.Listen = append([]string(nil), l.opts.listen...)
	}
	if l.opts.admin != "" {
		cfg.Admin = l.opts.admin
	}
	set, err := zones.Build(cfg)
	if err != nil {
		return nil, err
	}
	for _, w := range set.Warnings {
		l.logger.Warn("config warning", "warning", w)
	}
	return set, nil
}

// printDS prints the DS record (SHA-256) of every key that signs a signed
// zone's DNSKEY RRset (its KSKs, or its keys when they are CSKs) and is
// published now, the lines a parent zone needs. A config without a signed
// zone is an error.
func printDS(set *zones.Set, stdout, stderr io.Writer) int {
	n := 0
	now := time.Now()
	for _, z := range set.Zones {
		ksk := slices.ContainsFunc(z.Keys, (*zones.SigningKey).KSK)
		for _, k := range z.Keys {
			if k.KSK() != ksk || !k.Published(now) {
				continue
			}
			fmt.Fprintln(stdout, k.DNSKEY.ToDS(dns.SHA256).String())
			n++
		}
	}
	if n == 0 {
		fmt.Fprintln(stderr, "dnsd: -ds: no zone has dnssec.keys")
		return 1
	}
	return 0
}

// check runs exactly what a start runs before it serves (the state file,
// the run-time members, the GeoIP database, the groups' policies, the
// server's snapshot), with private metrics, and commits nothing.
func check(set *zones.Set, logger *slog.Logger) error {
	disp, err := dispatch.New(dispatch.Options{Logger: logger})
	if err != nil {
		return err
	}
	srv, err := dnsd.New(dnsd.Options{Logger: logger, Groups: disp})
	if err != nil {
		return err
	}
	ctl, err := members.New(members.Options{Logger: logger, Answers: disp, Server: srv})
	if err != nil {
		return err
	}
	return ctl.Check(set)
}
