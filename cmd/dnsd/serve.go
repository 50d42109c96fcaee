package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/cmd/internal/daemon"
	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/acme"
	"github.com/transmirror/transmirror/dnsd/admin"
	"github.com/transmirror/transmirror/dnsd/cluster"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/intake"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// serve runs dnsd on set until ctx is done. The parts, built in the order
// they depend on each other and then run as one flat list of components:
// the answers (dispatch) and the DNS edge; the NS set's store (cluster)
// when configured; the data plane: the watcher, fed by its probes and by
// the intake, which takes the pushed reports of the admin API, and the
// content map of the members' indexes (through the probes' client); the
// control plane: the member registry (members), fed by the admin API's
// membership routes and the store, committing to the answers; the ACME
// challenges (kept in the store's acme/ family, else in memory), which
// the DNS edge reads and the admin API writes; the admin server and the
// dashboard.
func serve(ctx context.Context, ld *loader, set *zones.Set, logger *slog.Logger, stdout io.Writer, demo bool) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector("dnsd"))
	events, flows := admin.NewEventLog(0, nil), admin.NewAnswerFlows(0, nil)
	disp, err := dispatch.New(dispatch.Options{Logger: logger, Registry: reg, OnAnswer: flows.Add, OnFailOpen: events.FailOpen, OnLagging: events.Lagging})
	if err != nil {
		return err
	}
	shared, err := newCluster(set, logger, reg, disp)
	if err != nil {
		return err
	}
	if shared != nil {
		defer shared.Close()
	}
	challenges := challengeStore(shared)
	srv, err := dnsd.New(dnsd.Options{Logger: logger, Registry: reg, Groups: disp, Challenges: acme.Served{Store: challenges}})
	if err != nil {
		return err
	}
	client, err := newProbeClient(set.Config.Health)
	if err != nil {
		return err
	}
	watcher, err := newWatcher(set.Config.Health, client, logger, reg, events, shared, disp)
	if err != nil {
		return err
	}
	ctl, err := newRegistry(set, logger, reg, disp, srv, watcher, shared, challenges)
	if err != nil {
		return err
	}
	sv, err := newServices(ctl.Current, client, disp, watcher, challenges, logger, reg)
	if err != nil {
		return err
	}
	scopesFile := func() string { return dispatch.ScopesPath(ctl.Current().StateFile) }
	loadScopes(disp, scopesFile(), logger)
	adm, err := newAdminSide(set, ld, logger, reg, ctl, disp, events, flows, shared, sv.book)
	if err != nil {
		return err
	}
	socks, err := listenDNS(set.Config, logger)
	defer closeSockets(socks)
	if err != nil {
		return err
	}
	adminLn, err := adm.listen(set.Config, reg, logger)
	if err != nil {
		return err
	}
	if adminLn != nil {
		defer adminLn.Close() // already closed by the server when it ran
	}
	if demo {
		printDemo(stdout, socks[0].pcs[0].LocalAddr().String(), adminLn)
	}

	components := []daemon.Component{watcher.Run, sv.contents.Run, sv.masters.Run, adm.dash.Run, scopeSaver(disp, scopesFile), sv.book.Run}
	if shared != nil {
		components = append(components, func(ctx context.Context) error { return shared.Run(ctx, ctl) })
	}
	components = append(components, dnsComponents(srv, socks)...)
	if adminLn != nil {
		components = append(components, adm.server(adminLn, set.Config, reg, logger, ctl, sv.reports, disp, events, sv.contents, sv.book))
	}
	// SIGHUP is caught before "dnsd started" tells anyone that they may
	// send it.
	err = daemon.Run(ctx, adm.reload.Reload, announce(set, events, logger), components...)
	logger.Info("dnsd stopped")
	return err
}

// services are what dnsd runs on its groups beside the DNS and the
// control plane: the content map of the members' indexes, the masters'
// traces, the book of ACME challenges and the intake of pushed reports.
type services struct {
	contents *contentmap.Map
	masters  *probe.MasterWatcher
	book     *acme.Book
	reports  *intake.Intake
}

// newServices builds the services on the groups as current returns them.
func newServices(current func() *zones.Set, client *http.Client, disp *dispatch.Dispatcher, watcher *probe.Watcher,
	challenges acme.Store, logger *slog.Logger, reg prometheus.Registerer) (services, error) {
	var sv services
	var err error
	if sv.contents, err = newContentMap(current, client, logger, reg); err != nil {
		return sv, err
	}
	if sv.masters, err = newMasters(current, disp, logger, reg); err != nil {
		return sv, err
	}
	if sv.book, err = acme.New(acme.Options{Set: current, Store: challenges, Registry: reg}); err != nil {
		return sv, err
	}
	sv.reports, err = intake.New(intake.Options{Groups: current, Watcher: watcher, Redirects: disp, Registry: reg})
	return sv, err
}

// announce is what daemon.Run calls once dnsd serves: the event and the
// log line of its start.
func announce(set *zones.Set, events *admin.EventLog, logger *slog.Logger) func() {
	return func() {
		events.Add(admin.Event{Kind: admin.EventStart, Message: fmt.Sprintf("dnsd started: %d zones, %d groups", len(set.Zones), len(set.Groups))})
		logger.Info("dnsd started", "zones", len(set.Zones), "groups", len(set.Groups))
	}
}

// scopeSaver saves the scope estimates to file() until ctx is done.
func scopeSaver(disp *dispatch.Dispatcher, file func() string) daemon.Component {
	return func(ctx context.Context) error {
		return disp.RunScopeSaver(ctx, file, dispatch.DefaultScopeSaveInterval)
	}
}

// newCluster is the NS set's store, nil for a single node (its state file
// keeps the run-time state).
func newCluster(set *zones.Set, logger *slog.Logger, reg prometheus.Registerer, disp *dispatch.Dispatcher) (*cluster.Store, error) {
	cc := set.Config.Cluster
	if !cc.Enabled() {
		return nil, nil
	}
	shared, err := cluster.New(cluster.Options{Config: cc, Logger: logger, Registry: reg,
		Cache: members.NewFileStore(set.StateFile), Health: disp, Pending: disp})
	if err != nil {
		return nil, err
	}
	logger.Info("cluster node", "node", cc.Node, "etcd", strings.Join(cc.Etcd.Endpoints, ","), "prefix", cc.Etcd.Prefix,
		"quorum", cc.Quorum.Enabled, "down_share", cc.Quorum.DownShare)
	return shared, nil
}

var _ dnsd.Challenges = acme.Served{}

// challengeStore is where the live ACME challenges are kept: the NS set's
// acme/ family, or this node's memory (they live minutes: a restart loses
// them and the ACME client tries again).
func challengeStore(shared *cluster.Store) acme.Store {
	if shared == nil {
		return acme.NewMemory()
	}
	return shared.Challenges()
}

// forgettingChallenges is the registry's watcher, whose Remove also drops
// the member's ACME challenges: a member that leaves its group (GROUP-EXIT
// here or on another node, a reload) is served with none at once.
type forgettingChallenges struct {
	members.Watcher
	store acme.Store
}

func (f forgettingChallenges) Remove(group, member string) error {
	return errors.Join(f.Watcher.Remove(group, member), acme.Forget(f.store, group, member))
}

// newWatcher is the watcher of the members; their states go to the
// dispatcher, or through the NS set's quorum (shared, when not nil).
func newWatcher(h zones.HealthConfig, client *http.Client, logger *slog.Logger, reg prometheus.Registerer, events *admin.EventLog,
	shared *cluster.Store, disp *dispatch.Dispatcher) (*probe.Watcher, error) {
	health := disp.Observe
	if shared != nil {
		health = shared.Observe
	}
	return probe.NewWatcher(probe.WatcherConfig{
		Client:     client,
		Registerer: reg,
		Rand:       rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		Logger:     logger,
		Health:     probe.HealthConfig{Rise: h.Rise, Fall: h.Fall},
		OnEvent:    events.ProbeEvent,
		OnUpdate:   health,
	})
}

// newProbeClient is the client of the members' admin listeners, shared by
// the watcher's probes and the content map: a run-time member of a group
// without allow_private is reached on public addresses only, whatever
// its probe's host name resolves to.
func newProbeClient(h zones.HealthConfig) (*http.Client, error) {
	roots, err := certs.RootsWith(h.CAPEM())
	if err != nil {
		return nil, fmt.Errorf("dnsd: health.ca_file: %w", err)
	}
	return probe.NewClient(probe.ClientOptions{Roots: roots, Public: zones.NotGlobal}), nil
}

// newRegistry is the member registry, loaded with set; its run-time state
// is kept by the NS set's store (shared, when not nil) or the state file;
// a member that leaves loses its ACME challenges (forgettingChallenges).
func newRegistry(set *zones.Set, logger *slog.Logger, reg prometheus.Registerer, disp *dispatch.Dispatcher,
	srv *dnsd.Server, watcher *probe.Watcher, shared *cluster.Store, challenges acme.Store) (*members.Controller, error) {
	mo := members.Options{Logger: logger, Registry: reg, Answers: disp, Server: srv, Watcher: watcher}
	if shared != nil {
		mo.Store, mo.Watcher = shared, shared.Watching(watcher)
	}
	mo.Watcher = forgettingChallenges{mo.Watcher, challenges}
	ctl, err := members.New(mo)
	if err != nil {
		return nil, err
	}
	if err := ctl.Load(set); err != nil {
		return nil, err
	}
	return ctl, nil
}

// loadScopes reads the per-scope rate estimates kept beside the state
// file; a bad file costs the estimates, never the start.
func loadScopes(disp *dispatch.Dispatcher, path string, logger *slog.Logger) {
	if path == "" {
		return
	}
	if err := disp.LoadScopes(path); err != nil {
		logger.Error("scope estimates not loaded: starting without them", "err", err)
	}
}

// listenDNS opens the DNS sockets of every listen address; on an error
// the sockets opened so far are returned too, for closeSockets.
func listenDNS(cfg *zones.Config, logger *slog.Logger) ([]socketPair, error) {
	var socks []socketPair
	for _, addr := range cfg.Listen {
		sp, err := listenPair(addr, udpSockets(cfg.Server.UDPSockets))
		if err != nil {
			return socks, err
		}
		socks = append(socks, sp)
		logger.Info("dns listening", "addr", sp.pcs[0].LocalAddr().String(), "proto", "udp+tcp", "udp_sockets", len(sp.pcs))
	}
	return socks, nil
}

func closeSockets(socks []socketPair) {
	for _, s := range socks {
		s.close()
	}
}

// dnsComponents serve DNS on socks: each UDP socket, each TCP listener.
func dnsComponents(srv *dnsd.Server, socks []socketPair) []daemon.Component {
	var out []daemon.Component
	for _, sp := range socks {
		for _, pc := range sp.pcs {
			out = append(out, func(ctx context.Context) error { return srv.ServeUDP(ctx, pc) })
		}
		out = append(out, func(ctx context.Context) error { return srv.ServeTCP(ctx, sp.ln) })
	}
	return out
}

// adminSide is what the admin server is made of: the signatures' checks
// and counters, its TLS keypair, the reloader and the dashboard.
type adminSide struct {
	verifier      *api.Verifier
	signed        *prometheus.CounterVec
	signedRefused *prometheus.CounterVec
	keypair       *certs.Keypair // nil: the admin listener is plain HTTP
	reload        admin.Reloader
	dash          *admin.Dashboard
	token         func() string
	pprof         bool // -pprof
}

func newAdminSide(set *zones.Set, ld *loader, logger *slog.Logger, reg *prometheus.Registry, ctl *members.Controller,
	disp *dispatch.Dispatcher, events *admin.EventLog, flows *admin.AnswerFlows, shared *cluster.Store, book *acme.Book) (*adminSide, error) {
	a := &adminSide{verifier: api.NewVerifier(set.Config.Health.SignatureWindow.D(), 0),
		token: func() string { return ctl.Current().Config.AdminToken }, pprof: ld.opts.pprof}
	var err error
	if a.signedRefused, err = admin.NewSignedRefused(reg); err != nil {
		return nil, err
	}
	if a.signed, err = admin.NewSignedRequests(reg); err != nil {
		return nil, err
	}
	if f := set.Config.AdminTLSFiles(); f.Enabled() {
		c, err := certs.Load(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("dnsd: admin_tls: %w", err)
		}
		a.keypair = certs.New(c)
	}
	reloader, err := daemon.NewReloader("dnsd", ld.name(), configLoad{ld, ctl, a.verifier, a.keypair}.reload, logger, reg)
	if err != nil {
		return nil, err
	}
	a.reload = events.Reloader(reloader)
	a.dash, err = admin.NewDashboard(admin.DashboardOptions{
		Logger: logger, Registry: reg, Source: ctl, Flows: flows, Events: events,
		TokenAuth: func() bool { return a.token() != "" },
		Cluster:   clusterView(shared), Challenges: book,
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// listen opens the admin listener; nil when none is configured.
func (a *adminSide) listen(cfg *zones.Config, reg prometheus.Registerer, logger *slog.Logger) (net.Listener, error) {
	if cfg.Admin == "" {
		return nil, nil
	}
	refused, err := daemon.Refused("dnsd", reg)
	if err != nil {
		return nil, err
	}
	lo := daemon.ListenOptions{
		MaxConnsPerClient: cfg.AdminLimits.MaxConnsPerClient,
		Refused:           refused.WithLabelValues(daemon.ListenerAdmin),
		TLS:               a.keypair,
	}
	ln, err := daemon.ListenAdmin(cfg.Admin, lo, logger)
	if err != nil {
		return nil, fmt.Errorf("dnsd: admin: %w", err)
	}
	return ln, nil
}

// server serves the admin API on ln: the membership routes to the
// registry (ctl), the pushed reports to the intake (reports).
func (a *adminSide) server(ln net.Listener, cfg *zones.Config, reg *prometheus.Registry, logger *slog.Logger,
	ctl *members.Controller, reports *intake.Intake, disp *dispatch.Dispatcher, events *admin.EventLog, contents admin.Contents,
	challenges admin.Challenges) daemon.Component {
	h := admin.NewHandler(admin.Options{
		Logger: logger, Gatherer: reg, Reloader: a.reload, Explainer: disp,
		Membership: events.Membership(ctl), Reports: reports, Verifier: a.verifier,
		SignedRequests: a.signed, SignedRefused: a.signedRefused, AdminToken: a.token, Dashboard: a.dash,
		Contents: contents, Challenges: challenges,
	})
	hs := daemon.NewAdminServer(api.Guard(daemon.Pprof(h, a.pprof), cfg.Admin, cfg.AdminHosts, a.keypair != nil), int(cfg.AdminLimits.MaxHeaderBytes), logger)
	return daemon.ServeHTTP("dnsd: admin", ln, hs, daemon.AdminShutdownGrace)
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
