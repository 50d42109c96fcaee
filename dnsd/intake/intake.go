// Package intake is the data plane's door of dnsd: the load reports that
// members push (LOAD-INFORM) and the redirect reports that dispatchers
// push come in here, already authenticated by the admin API, are decoded
// and checked once, and go on to the one place that uses them: a load
// report to the watcher (probe.Watcher, the judge of its time, its load
// and its order), a redirect report to the dispatcher's book of
// redirects. Nothing here is persisted or relayed: every node of an NS set
// gets every report from its source (a mirror's push: all).
//
// The intake checks what only it can know: that the body is one report
// (probe.DecodeReport: its shape and its figures), that the group is
// served and has the member, and that the report is the member's of the
// route it came by. Every refusal, the intake's, the watcher's and the
// admin API's before the body was looked at (a signature), is counted
// once, by reason, in transmirror_dnsd_reports_refused_total; a refused
// report changes nothing.
package intake

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// ErrWrongMember: a report whose group or member is not the route's.
var ErrWrongMember = fmt.Errorf("%w: report of another member", probe.ErrInvalidReport)

// Watcher is what the intake needs of the watcher: it takes a decoded,
// valid report of a member it watches and judges its time, load and order.
type Watcher interface {
	Push(r probe.Report, now time.Time) error
}

// Redirects is what the intake needs of the dispatcher: it books a
// dispatcher's redirect rates, refusing a report not newer than that
// dispatcher's last (dispatch.Dispatcher.Redirects).
type Redirects interface {
	Redirects(group, dispatcher string, at time.Time, rates map[string]float64) error
}

// Options configure an Intake.
type Options struct {
	// Groups returns the set being served (members.Controller.Current);
	// required.
	Groups func() *zones.Set
	// Watcher takes load reports; required.
	Watcher Watcher
	// Redirects takes redirect reports; required.
	Redirects Redirects
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Registry gets transmirror_dnsd_reports_refused_total; nil keeps it
	// private.
	Registry prometheus.Registerer
}

// Intake takes pushed reports (see the package doc).
type Intake struct {
	groups  func() *zones.Set
	watch   Watcher
	redir   Redirects
	now     func() time.Time
	refused *prometheus.CounterVec
}

// New returns an Intake.
func New(o Options) (*Intake, error) {
	if o.Groups == nil || o.Watcher == nil || o.Redirects == nil {
		return nil, errors.New("intake: needs the groups, a watcher and the redirects' book")
	}
	in := &Intake{groups: o.Groups, watch: o.Watcher, redir: o.Redirects, now: o.Now}
	if in.now == nil {
		in.now = time.Now
	}
	in.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "reports_refused_total",
		Help: "Pushed load reports refused, by reason (unauthenticated, future, stale, out_of_order, absurd_load, invalid, unknown_group, unknown_member).",
	}, []string{"reason"})
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if err := reg.Register(in.refused); err != nil {
		return nil, fmt.Errorf("intake: register metrics: %w", err)
	}
	for _, r := range Reasons {
		in.refused.WithLabelValues(r)
	}
	return in, nil
}

// Load is LOAD-INFORM: body, a report pushed for member of group and
// already authenticated, is decoded, checked (see the package doc) and
// handed to the watcher. A refusal is counted and returned; it changed
// nothing.
func (in *Intake) Load(group, member string, body []byte) error {
	err := in.load(group, member, body)
	if reason := refusal(err); reason != "" {
		in.refused.WithLabelValues(reason).Inc()
	}
	return err
}

func (in *Intake) load(group, member string, body []byte) error {
	r, err := probe.DecodeReport(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return err
	}
	group = dns.CanonicalName(group)
	g := in.group(group)
	if g == nil {
		return fmt.Errorf("%w: %s", zones.ErrUnknownGroup, group)
	}
	if !slices.ContainsFunc(g.Members, func(m zones.MemberConfig) bool { return m.Name == member }) {
		return fmt.Errorf("%w: %s in %s", probe.ErrUnknownMember, member, group)
	}
	if dns.CanonicalName(r.Group) != group || r.Member != member {
		return fmt.Errorf("%w: report is for %s/%s, posted to %s/%s", ErrWrongMember, r.Group, r.Member, group, member)
	}
	r.Group = group
	return in.watch.Push(r, in.now())
}

// Refused counts a load report that the admin API refused before it was
// looked at, by the reason of transmirror_dnsd_signed_refused_total
// (admin's): a signature's clock off is counted as a report's (future,
// stale), a body too large as invalid, an unknown group as such, every
// other fault of the signature as unauthenticated; a reason that is no
// fault of the sender's is not counted.
func (in *Intake) Refused(signedReason string) {
	if r, ok := signedReasons[signedReason]; ok {
		in.refused.WithLabelValues(r).Inc()
	}
}

// signedReasons maps the admin API's reasons to the reports'.
var signedReasons = map[string]string{
	"unsigned": RefusedUnauthenticated, "malformed": RefusedUnauthenticated,
	"bad_signature": RefusedUnauthenticated, "replayed": RefusedUnauthenticated,
	"replay_cache_full": RefusedUnauthenticated, "no_secret": RefusedUnauthenticated,
	"stale": RefusedStale, "future": RefusedFuture,
	"unknown_group": RefusedUnknownGroup, "too_large": RefusedInvalid,
}

// Redirect takes a dispatcher's report of the redirects it sends, already
// authenticated and decoded: checked (api.RedirectReport.Validate; its
// time within the window of dnsd's clock that load reports have:
// health.report_max_skew ahead, health.report_max_age behind), then
// booked (Redirects), which refuses a report not newer than that
// dispatcher's last.
func (in *Intake) Redirect(group string, r api.RedirectReport) error {
	group = dns.CanonicalName(group)
	set := in.groups()
	if set == nil || set.Group(group) == nil {
		return fmt.Errorf("%w: %s", zones.ErrUnknownGroup, group)
	}
	h := set.Config.Health
	if err := r.Validate(); err != nil {
		return fmt.Errorf("%w: redirect report: %w", probe.ErrInvalidReport, err)
	}
	if err := (probe.Report{Time: r.Time}).CheckTime(in.now(), h.ReportMaxSkew.D(), h.ReportMaxAge.D()); err != nil {
		return fmt.Errorf("redirect report: %w", err)
	}
	return in.redir.Redirects(group, r.Dispatcher, r.Time, r.Members)
}

// group is the served group of that name, nil when none.
func (in *Intake) group(name string) *zones.GroupConfig {
	set := in.groups()
	if set == nil {
		return nil
	}
	return set.Group(name)
}
