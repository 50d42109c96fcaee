package admin

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd/acme"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
)

// Dashboard defaults.
const (
	// DefaultStreamInterval is how often a stream sends a snapshot.
	DefaultStreamInterval = 2 * time.Second
	// DefaultStreamHeartbeat is how often a stream sends a comment line
	// that keeps proxies from closing it.
	DefaultStreamHeartbeat = 15 * time.Second
	// DefaultMaxStreams bounds the concurrent event streams.
	DefaultMaxStreams = 16
	// streamWriteTimeout bounds one write to a stream's client.
	streamWriteTimeout = 10 * time.Second
)

//go:embed web
var webFiles embed.FS

// DashboardSource is what the dashboard needs of the groups (implemented
// by Controller).
type DashboardSource interface {
	List() api.GroupList
	View(group string) (api.GroupView, error)
}

var _ DashboardSource = (*members.Controller)(nil)

// LiveChallenges lists the live ACME DNS-01 challenges (implemented by
// acme.Book).
type LiveChallenges interface {
	List() []acme.Challenge
}

// DashboardOptions configure a Dashboard.
type DashboardOptions struct {
	// Logger gets the dashboard's logs; nil discards them.
	Logger *slog.Logger
	// Registry gets the member gauges and the stream gauge; nil keeps
	// them private.
	Registry prometheus.Registerer
	// Source is the groups (required).
	Source DashboardSource
	// Flows are the answer flows the Dispatcher feeds (OnAnswer); nil
	// shows none.
	Flows *AnswerFlows
	// Events is the recent-events list; nil makes an empty one.
	Events *EventLog
	// History keeps the charts' samples; nil makes NewHistory(0).
	History *History
	// HistoryInterval is the time between samples (default
	// DefaultHistoryInterval).
	HistoryInterval time.Duration
	// StreamInterval, StreamHeartbeat and MaxStreams tune api.Stream
	// (defaults DefaultStreamInterval, DefaultStreamHeartbeat,
	// DefaultMaxStreams).
	StreamInterval  time.Duration
	StreamHeartbeat time.Duration
	MaxStreams      int
	// Cluster is the NS set as this node sees it; nil (a single node)
	// shows none.
	Cluster func() *ClusterView
	// TokenAuth reports whether an admin token is configured, so that the
	// page offers drain buttons that use it; nil means no.
	TokenAuth func() bool
	// Challenges are the live ACME challenges, counted per member; nil
	// shows none.
	Challenges LiveChallenges
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Dashboard is the operator's page and its read-only JSON: the groups and
// members with their live state, the answer flows of the last minute, the
// last hour of answers and utilization per member, and the recent events,
// pushed to the page as Server-Sent Events. Run samples the history and
// ends the streams when its context is done.
type Dashboard struct {
	log       *slog.Logger
	src       DashboardSource
	flows     *AnswerFlows
	events    *EventLog
	history   *History
	histEvery time.Duration
	every     time.Duration
	heartbeat time.Duration
	tokenAuth func() bool
	cluster   func() *ClusterView
	acme      LiveChallenges // nil: none
	now       func() time.Time
	web       fs.FS         // the page's files
	slots     chan struct{} // one per stream allowed
	stop      chan struct{} // closed when Run ends
	stopOnce  sync.Once

	streams prometheus.Gauge
	rejects prometheus.Counter
}

// NewDashboard returns a Dashboard and registers its metrics: the stream
// gauge and the per-member gauges transmirror_dnsd_member_up,
// transmirror_dnsd_member_utilization_ratio and its two parts,
// transmirror_dnsd_member_load_utilization_ratio and (for members with a
// bandwidth) transmirror_dnsd_member_bandwidth_utilization_ratio, read
// from Source at each scrape, so a removed member's series goes with it.
func NewDashboard(o DashboardOptions) (*Dashboard, error) {
	if o.Source == nil {
		return nil, errors.New("admin: dashboard needs a source")
	}
	d := &Dashboard{
		log: o.Logger, src: o.Source, flows: o.Flows, events: o.Events, history: o.History,
		histEvery: o.HistoryInterval, every: o.StreamInterval, heartbeat: o.StreamHeartbeat,
		tokenAuth: o.TokenAuth, cluster: o.Cluster, acme: o.Challenges, now: o.Now, stop: make(chan struct{}),
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.now == nil {
		d.now = time.Now
	}
	web, err := fs.Sub(webFiles, "web")
	if err != nil {
		return nil, fmt.Errorf("admin: dashboard files: %w", err)
	}
	d.web = web
	if d.events == nil {
		d.events = NewEventLog(0, d.now)
	}
	if d.history == nil {
		d.history = NewHistory(0)
	}
	if d.flows == nil {
		d.flows = NewAnswerFlows(0, d.now)
	}
	if d.histEvery <= 0 {
		d.histEvery = DefaultHistoryInterval
	}
	if d.every <= 0 {
		d.every = DefaultStreamInterval
	}
	if d.heartbeat <= 0 {
		d.heartbeat = DefaultStreamHeartbeat
	}
	if d.tokenAuth == nil {
		d.tokenAuth = func() bool { return false }
	}
	maxStreams := o.MaxStreams
	if maxStreams <= 0 {
		maxStreams = DefaultMaxStreams
	}
	d.slots = make(chan struct{}, maxStreams)
	d.streams = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "dashboard_streams",
		Help: "Dashboard event streams (" + string(api.Stream) + ") open now.",
	})
	d.rejects = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "dashboard_streams_rejected_total",
		Help: "Dashboard event streams refused because the maximum was open.",
	})
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	for _, c := range []prometheus.Collector{d.streams, d.rejects, newMemberCollector(d.src)} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("admin: register metrics: %w", err)
		}
	}
	return d, nil
}

// Events returns the dashboard's event log.
func (d *Dashboard) Events() *EventLog { return d.events }

// Run samples the history every HistoryInterval until ctx is done, then
// ends the open streams and returns nil.
func (d *Dashboard) Run(ctx context.Context) error {
	defer d.stopOnce.Do(func() { close(d.stop) })
	t := time.NewTicker(d.histEvery)
	defer t.Stop()
	for {
		d.Sample()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sample records one history point of every member now, and lets the
// answer flows forget groups and members that are gone.
func (d *Dashboard) Sample() {
	var samples []MemberSample
	keep := make(map[string][]string)
	for _, gs := range d.src.List().Groups {
		v, err := d.src.View(gs.Name)
		if err != nil {
			continue
		}
		for _, m := range v.Members {
			keep[v.Name] = append(keep[v.Name], m.Name)
			samples = append(samples, MemberSample{
				Group: v.Name, Member: m.Name, Utilization: m.Utilization,
				AnswersTotal: d.flows.Total(v.Name, m.Name),
			})
		}
	}
	d.flows.Keep(keep)
	d.history.Record(d.now(), samples)
}

// DashboardSnapshot is the JSON of api.Dashboard and of the stream's
// "snapshot" events. It holds no secret.
type DashboardSnapshot struct {
	// Time is when it was made.
	Time time.Time `json:"time"`
	// TokenAuth is true when an admin token is configured (drains from
	// the page need it).
	TokenAuth bool `json:"token_auth"`
	// Cluster is the NS set as this node sees it (absent: a single node).
	Cluster *ClusterView `json:"cluster,omitempty"`
	// Groups are the groups in config order.
	Groups []DashboardGroup `json:"groups"`
	// Events are the recent events, oldest first.
	Events []Event `json:"events"`
	// History is the last hour per group and member; only in
	// api.Dashboard and the stream's "history" events.
	History *DashboardHistory `json:"history,omitempty"`
}

// ClusterView is what the dashboard shows of the NS set: which node
// answered, whether it is degraded (etcd away: serving its last known
// state, membership changes refused) since when and why, and the nodes
// present in etcd.
type ClusterView struct {
	Node     string    `json:"node"`
	Degraded bool      `json:"degraded"`
	Since    time.Time `json:"since,omitzero"`
	Error    string    `json:"error,omitempty"`
	Nodes    []string  `json:"nodes"`
	// Quorum is on; DownShare is the share of the live nodes that a
	// member's down votes must exceed; Votes are the members some live
	// node sees down.
	Quorum    bool         `json:"quorum"`
	DownShare float64      `json:"down_share,omitempty"`
	Votes     []MemberVote `json:"votes,omitempty"`
}

// MemberVote is quorum's count of one member: Down of the Live nodes see
// it down, namely DownBy.
type MemberVote struct {
	Group  string   `json:"group"`
	Member string   `json:"member"`
	Down   int      `json:"down"`
	Live   int      `json:"live"`
	DownBy []string `json:"down_by"`
}

// DashboardGroup is one group of a snapshot: its view and the answer
// flows of the last minute.
type DashboardGroup struct {
	api.GroupView
	// Flows are the answers of the last minute by client country and
	// member, largest first.
	Flows []Flow `json:"flows"`
	// ACME counts the live ACME challenges by member (absent: none).
	ACME map[string]int `json:"acme_challenges,omitempty"`
}

// DashboardHistory is the charts' data.
type DashboardHistory struct {
	// IntervalSeconds is the time between points.
	IntervalSeconds float64 `json:"interval_seconds"`
	// Groups maps group → member → points, oldest first.
	Groups map[string]map[string][]HistoryPoint `json:"groups"`
}

// Snapshot returns the dashboard's data now, with the history when
// withHistory.
func (d *Dashboard) Snapshot(withHistory bool) DashboardSnapshot {
	s := DashboardSnapshot{Time: d.now(), TokenAuth: d.tokenAuth(), Groups: []DashboardGroup{}, Events: d.events.Snapshot()}
	acme := d.challenges()
	for _, gs := range d.src.List().Groups {
		v, err := d.src.View(gs.Name)
		if err != nil {
			continue
		}
		s.Groups = append(s.Groups, DashboardGroup{GroupView: v, Flows: d.flows.Flows(v.Name), ACME: acme[v.Name]})
	}
	if d.cluster != nil {
		s.Cluster = d.cluster()
	}
	if withHistory {
		s.History = d.historyData(s.Groups)
	}
	return s
}

// challenges counts the live ACME challenges by group and member.
func (d *Dashboard) challenges() map[string]map[string]int {
	if d.acme == nil {
		return nil
	}
	out := map[string]map[string]int{}
	for _, c := range d.acme.List() {
		if out[c.Group] == nil {
			out[c.Group] = map[string]int{}
		}
		out[c.Group][c.Member]++
	}
	return out
}

func (d *Dashboard) historyData(groups []DashboardGroup) *DashboardHistory {
	h := &DashboardHistory{IntervalSeconds: d.histEvery.Seconds(), Groups: make(map[string]map[string][]HistoryPoint)}
	for _, g := range groups {
		h.Groups[g.Name] = d.history.Series(g.Name)
	}
	return h
}

// register adds the dashboard's routes to mux: the page at /, its JSON at
// api.Dashboard and the live stream at api.Stream.
func (d *Dashboard) register(mux *http.ServeMux) {
	files := http.FileServerFS(d.web)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		files.ServeHTTP(w, r)
	})
	mux.Handle("GET /ui/", http.StripPrefix("/ui", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		files.ServeHTTP(w, r)
	})))
	mux.HandleFunc(api.Dashboard.Pattern(), func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, d.Snapshot(true))
	})
	mux.HandleFunc(api.Stream.Pattern(), d.serveStream)
}

// pageHeaders are the headers of the page and its assets: nothing from
// elsewhere may load, and no other site may frame it.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// serveStream is api.Stream: Server-Sent Events with a "snapshot"
// event at once, every StreamInterval and right after each new event, a
// "history" event at once and after each new sample, and a comment line
// every StreamHeartbeat. It ends when the client goes away or the
// Dashboard stops.
func (d *Dashboard) serveStream(w http.ResponseWriter, r *http.Request) {
	select {
	case d.slots <- struct{}{}:
	default:
		d.rejects.Inc()
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, api.ErrorReply{Error: "too many dashboard streams open"})
		return
	}
	defer func() { <-d.slots }()
	d.streams.Inc()
	defer d.streams.Dec()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)

	send := func(event string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return err
		}
		return rc.Flush()
	}
	comment := func(s string) error {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := fmt.Fprintf(w, ": %s\n\n", s); err != nil {
			return err
		}
		return rc.Flush()
	}
	_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	if _, err := fmt.Fprintf(w, ": transmirror dashboard stream\nretry: %d\n\n", 2*d.every.Milliseconds()); err != nil {
		return
	}
	tick := time.NewTicker(d.every)
	defer tick.Stop()
	beat := time.NewTicker(d.heartbeat)
	defer beat.Stop()
	var histSeq uint64
	for {
		changed := d.events.Changed()
		s := d.Snapshot(false)
		if seq := d.history.Seq(); seq != histSeq {
			histSeq = seq
			if err := send("history", d.historyData(s.Groups)); err != nil {
				return
			}
		}
		if err := send("snapshot", s); err != nil {
			return
		}
		for next := false; !next; {
			select {
			case <-r.Context().Done():
				return
			case <-d.stop:
				return
			case <-changed:
				next = true
			case <-tick.C:
				next = true
			case <-beat.C:
				if err := comment("heartbeat"); err != nil {
					return
				}
			}
		}
	}
}

// memberCollector exports every member's state and utilization at scrape
// time from the source, so that removed members disappear with their
// series.
type memberCollector struct {
	src                        DashboardSource
	up, util, loadUtil, bwUtil *prometheus.Desc
}

func newMemberCollector(src DashboardSource) *memberCollector {
	labels := []string{"group", "member"}
	return &memberCollector{
		src: src,
		up: prometheus.NewDesc("transmirror_dnsd_member_up",
			"Whether the member is up (1) or unknown, down or draining (0).", labels, nil),
		util: prometheus.NewDesc("transmirror_dnsd_member_utilization_ratio",
			"The member's utilization as the policy sees it: the larger of its load and its bandwidth utilization.", labels, nil),
		loadUtil: prometheus.NewDesc("transmirror_dnsd_member_load_utilization_ratio",
			"The member's last reported load plus the hidden load of recent answers, over its capacity.", labels, nil),
		bwUtil: prometheus.NewDesc("transmirror_dnsd_member_bandwidth_utilization_ratio",
			"The member's last reported bytes per second over its bandwidth (members with a bandwidth only).", labels, nil),
	}
}

// Describe sends the descriptors.
func (c *memberCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.util
	ch <- c.loadUtil
	ch <- c.bwUtil
}

// Collect sends one gauge of each kind per member; the bandwidth
// utilization only for a member that has a bandwidth.
func (c *memberCollector) Collect(ch chan<- prometheus.Metric) {
	for _, gs := range c.src.List().Groups {
		v, err := c.src.View(gs.Name)
		if err != nil {
			continue
		}
		for _, m := range v.Members {
			up := 0.0
			if m.State == probe.StateUp.String() {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, v.Name, m.Name)
			ch <- prometheus.MustNewConstMetric(c.util, prometheus.GaugeValue, m.Utilization, v.Name, m.Name)
			ch <- prometheus.MustNewConstMetric(c.loadUtil, prometheus.GaugeValue, m.LoadUtilization, v.Name, m.Name)
			if m.Bandwidth > 0 {
				ch <- prometheus.MustNewConstMetric(c.bwUtil, prometheus.GaugeValue, m.BandwidthUtilization, v.Name, m.Name)
			}
		}
	}
}

var _ prometheus.Collector = (*memberCollector)(nil)
