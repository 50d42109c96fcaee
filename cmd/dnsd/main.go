// Command dnsd is transmirror's authoritative DNS server: it serves RFC 1035
// zone files and answers mirror group names with the members that suit each
// client.
//
// Usage:
//
//	dnsd -config dnsd.yaml            serve a configuration
//	dnsd -check -config dnsd.yaml     validate it and exit 0 or 1
//	dnsd -listen 127.0.0.1:5300 -zone example.test=example.test.zone
//	                                  serve plain zone files, no config file
//	dnsd -demo                        serve the embedded demo zone
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/cmd/internal/daemon"
	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/admin"
	"github.com/transmirror/transmirror/dnsd/cluster"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/intake"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type options struct {
	config    string
	check     bool
	demo      bool
	listen    daemon.ListFlag
	zones     daemon.ListFlag
	admin     string
	logFormat string
	logLevel  string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("dnsd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "path of the YAML configuration file")
	fs.BoolVar(&o.check, "check", false, "validate the configuration and zone files, then exit")
	fs.BoolVar(&o.demo, "demo", false, "serve the embedded demo configuration")
	fs.Var(&o.listen, "listen", "DNS listen address host:port, UDP and TCP (repeatable; overrides the config)")
	fs.Var(&o.zones, "zone", "serve ORIGIN=FILE without a config file (repeatable; AXFR allowed from loopback)")
	fs.StringVar(&o.admin, "admin", "", "admin HTTP listen address (overrides the config)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
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
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "dnsd:", err)
		return 2
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

func serve(ctx context.Context, ld *loader, set *zones.Set, logger *slog.Logger, stdout io.Writer, demo bool) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	events := admin.NewEventLog(0, nil)
	flows := admin.NewAnswerFlows(0, nil)
	disp, err := dispatch.New(dispatch.Options{Logger: logger, Registry: reg,
		OnAnswer: flows.Add, OnFailOpen: events.FailOpen})
	if err != nil {
		return err
	}
	srv, err := dnsd.New(dnsd.Options{Logger: logger, Registry: reg, Groups: disp})
	if err != nil {
		return err
	}
	var shared *cluster.Store // nil: a single node, its state file keeps the run-time state
	health := disp.Observe    // where the members' states go: the dispatcher, or through the NS set's quorum
	if cc := set.Config.Cluster; cc.Enabled() {
		shared, err = cluster.New(cluster.Options{Config: cc, Logger: logger, Registry: reg,
			Cache: members.NewFileStore(set.StateFile), Health: disp, Pending: disp})
		if err != nil {
			return err
		}
		defer shared.Close()
		health = shared.Observe
		logger.Info("cluster node", "node", cc.Node, "etcd", strings.Join(cc.Etcd.Endpoints, ","), "prefix", cc.Etcd.Prefix,
			"quorum", cc.Quorum.Enabled, "down_share", cc.Quorum.DownShare)
	}
	h := set.Config.Health
	roots, err := certs.RootsWith(h.CAPEM())
	if err != nil {
		return fmt.Errorf("dnsd: health.ca_file: %w", err)
	}
	watcher, err := probe.NewWatcher(probe.WatcherConfig{
		// A run-time member of a group without allow_private is probed
		// on public addresses only, whatever its probe's host name
		// resolves to.
		Client:     probe.NewClient(probe.ClientOptions{Roots: roots, Public: zones.NotGlobal}),
		Registerer: reg,
		Rand:       rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		Logger:     logger,
		Health:     probe.HealthConfig{Rise: h.Rise, Fall: h.Fall},
		OnEvent:    events.ProbeEvent,
		OnUpdate:   health,
	})
	if err != nil {
		return err
	}
	mo := members.Options{Logger: logger, Registry: reg, Answers: disp, Server: srv, Watcher: watcher}
	if shared != nil {
		mo.Store, mo.Watcher = shared, shared.Watching(watcher)
	}
	ctl, err := members.New(mo)
	if err != nil {
		return err
	}
	if err := ctl.Load(set); err != nil {
		return err
	}
	reports, err := intake.New(intake.Options{Groups: ctl.Current, Watcher: watcher, Redirects: disp, Registry: reg})
	if err != nil {
		return err
	}
	// The per-scope rate estimates live beside the state file; a bad file
	// costs the estimates, never the start.
	scopesFile := func() string { return dispatch.ScopesPath(ctl.Current().StateFile) }
	if p := scopesFile(); p != "" {
		if err := disp.LoadScopes(p); err != nil {
			logger.Error("scope estimates not loaded: starting without them", "err", err)
		}
	}
	verifier := api.NewVerifier(h.SignatureWindow.D(), 0)
	signedRefused, err := admin.NewSignedRefused(reg)
	if err != nil {
		return err
	}
	signed, err := admin.NewSignedRequests(reg)
	if err != nil {
		return err
	}
	var keypair *certs.Keypair // nil: the admin listener is plain HTTP
	if f := set.Config.AdminTLSFiles(); f.Enabled() {
		c, err := certs.Load(f.CertFile, f.KeyFile)
		if err != nil {
			return fmt.Errorf("dnsd: admin_tls: %w", err)
		}
		keypair = certs.New(c)
	}
	reloader, err := daemon.NewReloader("dnsd", ld.name(), configLoad{ld, ctl, verifier, keypair}.reload, logger, reg)
	if err != nil {
		return err
	}
	rl := events.Reloader(reloader)
	adminToken := func() string { return ctl.Current().Config.AdminToken }
	dash, err := admin.NewDashboard(admin.DashboardOptions{
		Logger: logger, Registry: reg, Source: ctl, Flows: flows, Events: events,
		TokenAuth: func() bool { return adminToken() != "" },
		Cluster:   clusterView(shared),
	})
	if err != nil {
		return err
	}

	var socks []socketPair
	defer func() {
		for _, s := range socks {
			s.close()
		}
	}()
	for _, addr := range set.Config.Listen {
		sp, err := listenPair(addr, udpSockets(set.Config.Server.UDPSockets))
		if err != nil {
			return err
		}
		socks = append(socks, sp)
		logger.Info("dns listening", "addr", sp.pcs[0].LocalAddr().String(), "proto", "udp+tcp", "udp_sockets", len(sp.pcs))
	}
	var adminLn net.Listener
	if set.Config.Admin != "" {
		refused, err := daemon.Refused("dnsd", reg)
		if err != nil {
			return err
		}
		lo := daemon.ListenOptions{
			MaxConnsPerClient: set.Config.AdminLimits.MaxConnsPerClient,
			Refused:           refused.WithLabelValues(daemon.ListenerAdmin),
			TLS:               keypair,
		}
		if adminLn, err = daemon.ListenAdmin(set.Config.Admin, lo, logger); err != nil {
			return fmt.Errorf("dnsd: admin: %w", err)
		}
		defer adminLn.Close() // already closed by the server when it ran
	}
	if demo {
		printDemo(stdout, socks[0].pcs[0].LocalAddr().String(), adminLn)
	}

	components := []daemon.Component{watcher.Run, dash.Run,
		func(ctx context.Context) error {
			return disp.RunScopeSaver(ctx, scopesFile, dispatch.DefaultScopeSaveInterval)
		}}
	if shared != nil {
		components = append(components, func(ctx context.Context) error { return shared.Run(ctx, ctl) })
	}
	for _, sp := range socks {
		for _, pc := range sp.pcs {
			components = append(components, func(ctx context.Context) error { return srv.ServeUDP(ctx, pc) })
		}
		components = append(components, func(ctx context.Context) error { return srv.ServeTCP(ctx, sp.ln) })
	}
	if adminLn != nil {
		hs := daemon.NewAdminServer(api.Guard(admin.NewHandler(admin.Options{
			Logger: logger, Gatherer: reg, Reloader: rl, Explainer: disp,
			Membership: events.Membership(ctl), Reports: reports, Verifier: verifier, SignedRequests: signed, SignedRefused: signedRefused,
			AdminToken: adminToken, Dashboard: dash,
		}), set.Config.Admin, set.Config.AdminHosts, keypair != nil), int(set.Config.AdminLimits.MaxHeaderBytes), logger)
		components = append(components, daemon.ServeHTTP("dnsd: admin", adminLn, hs, daemon.AdminShutdownGrace))
	}
	// SIGHUP is caught before "dnsd started" tells anyone that they may
	// send it.
	started := func() {
		events.Add(admin.Event{Kind: admin.EventStart, Message: fmt.Sprintf("dnsd started: %d zones, %d groups", len(set.Zones), len(set.Groups))})
		logger.Info("dnsd started", "zones", len(set.Zones), "groups", len(set.Groups))
	}
	err = daemon.Run(ctx, rl.Reload, started, components...)
	logger.Info("dnsd stopped")
	return err
}

// clusterView is what the dashboard shows of the NS set; nil for a single
// node.
func clusterView(s *cluster.Store) func() *admin.ClusterView {
	if s == nil {
		return nil
	}
	return func() *admin.ClusterView {
		st := s.Status()
		v := &admin.ClusterView{Node: st.Node, Degraded: st.Degraded, Since: st.Since, Error: st.Error, Nodes: []string{},
			Quorum: st.Quorum, DownShare: st.DownShare}
		for _, n := range st.Nodes {
			v.Nodes = append(v.Nodes, n.Node)
		}
		for _, mv := range st.Votes {
			v.Votes = append(v.Votes, admin.MemberVote{Group: mv.Group, Member: mv.Member, Down: mv.Down, Live: mv.Live, DownBy: mv.DownBy})
		}
		return v
	}
}
