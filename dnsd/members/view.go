package members

import (
	"fmt"
	"math"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler"
	"github.com/transmirror/transmirror/zones"
)

// Bounds of a group view's JSON from the caps of zones, for the check
// below; the worst-case view test encodes the largest view those caps
// allow and holds it, and each member of it, to these figures.
const (
	// maxHostJSON bounds a host name in the JSON: a domain name of 255
	// bytes at most (its dot included), its quotes and key.
	maxHostJSON = 255 + len(`"host":"",`)
	// maxAddrJSON is the longest address in the JSON: a full IPv6
	// address, its quotes and comma.
	maxAddrJSON = len(`"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",`)
	// memberViewFixed bounds the rest of a member's JSON: its keys, 26
	// numbers of at most 24 bytes each, times of 35, the location, the
	// state and source, and its last report's keys and figures (its top
	// left out, see lastReport), the rescued counts (twice: the
	// member's and its report's) of up to 20 digits, and its report's
	// schemes and certificate expiry.
	memberViewFixed = 1900 + 2*len(`"rescued":18446744073709551615,`) + len(`"schemes":["https","http"],`) +
		len(`"cert_not_after":"9999-12-31T23:59:59.999999999Z",`)
	// maxTopJSON bounds a group's top in the JSON: MaxTopPaths paths
	// whose JSON is no longer than themselves (probe.CheckTopPath), their
	// quotes and keys, and counts of at most 24 bytes.
	maxTopJSON = len(`"top":[],`) + probe.MaxTopPaths*(probe.MaxTopPathLen+len(`{"path":"","count":},`)+24)
	// maxMemberViewBytes bounds one member's JSON in a view: its name
	// twice (itself and its last report's), its host and its report's
	// group name, its addresses and its probe URL (which needs no
	// escaping: zones allows only the characters of RFC 3986).
	maxMemberViewBytes = memberViewFixed + 2*zones.MaxMemberNameLen + 2*maxHostJSON +
		zones.MaxMemberAddresses*maxAddrJSON + zones.MaxProbeLen
	// maxViewHeadBytes bounds a view without its members: its settings
	// and the group's top.
	maxViewHeadBytes = 1024 + maxTopJSON
	// maxViewBytes bounds the JSON of GET /v1/groups/{group}.
	maxViewBytes = maxViewHeadBytes + zones.MaxGroupMembers*maxMemberViewBytes
)

// The largest view dnsd can make fits in half of what a mirror reads
// (api.MaxViewBytes): this constant is negative, and the conversion does
// not compile, when a cap of zones grows past it.
const _ = uint(api.MaxViewBytes/2 - maxViewBytes)

// View is GROUP-QUERY: the group's settings and every member with its live
// state, its figures as measured (reported load, bytes per second and
// time, pending load, capacity and bandwidth), utilization, last report
// and share of the answers. It shows no secret.
func (c *Controller) View(group string) (api.GroupView, error) {
	set := c.current.Load()
	if set == nil {
		return api.GroupView{}, dnsd.ErrNoConfig
	}
	g := set.Group(group)
	if g == nil {
		return api.GroupView{}, fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, dns.CanonicalName(group))
	}
	now := c.now()
	live, _ := c.disp.Live(g.Name)
	v := api.GroupView{
		Name: g.Name, Policy: g.Policy.Name, Answers: g.Answers, Time: now,
		TTL:        api.TTLView{Min: g.TTL.Min, Max: g.TTL.Max},
		Watermarks: api.Watermarks{Low: g.Policy.LowWatermark, High: g.Policy.HighWatermark},
		FailOpen:   c.disp.FailingOpen(g.Name),
		MaxLag:     g.MaxLag.D().Seconds(), LagFailOpen: c.disp.LaggingFailOpen(g.Name),
	}
	var answers uint64
	var capAnswered float64
	var tops [][]probe.PathCount
	for _, m := range g.Members {
		l := live[m.Name]
		answers += l.Answers
		if l.State.Answered() {
			capAnswered += m.Capacity * m.Weight
		}
	}
	for _, m := range g.Members {
		l := live[m.Name]
		mv := api.MemberView{MemberInfo: memberInfo(m), Source: "config", State: l.State.Name()}
		if m.Runtime {
			mv.Source = "runtime"
		}
		if top := c.lastReport(g.Name, now, &mv); len(top) > 0 {
			tops = append(tops, top)
		}
		mv.Load, mv.Reported, mv.Pending = l.State.Load, l.State.Reported, l.Pending
		mv.BytesPerSecond = l.State.BytesPerSecond
		if f := l.State.Freshness; f.Known {
			mv.Generation, mv.Lag = l.State.Generation, math.Round(f.Lag.Seconds())
		}
		fig := scheduler.Figures{
			Load: mv.Load, Pending: mv.Pending, Capacity: m.Capacity,
			BytesPerSecond: mv.BytesPerSecond, Bandwidth: m.Bandwidth.BytesPerSecond(),
		}
		mv.Utilization = finiteOrZero(fig.Utilization())
		mv.LoadUtilization = finiteOrZero(fig.LoadUtilization())
		mv.BandwidthUtilization = finiteOrZero(fig.BandwidthUtilization())
		if answers > 0 {
			mv.AnswerShare = api.Round2(float64(l.Answers) / float64(answers))
		}
		if capAnswered > 0 && l.State.Answered() {
			mv.CapacityShare = api.Round2(m.Capacity * m.Weight / capAnswered)
		}
		v.Members = append(v.Members, mv)
	}
	v.Top = probe.MergeTop(probe.MaxTopPaths, tops...)
	return v, nil
}

// lastReport fills in mv what the watcher knows of the member: since when
// it is in its state, its last report (without its top, which the group's
// Top merges: 128 members' lists of 16 paths of up to 512 bytes would
// take the view past what a mirror reads) with its age and rescued count. It returns the report's top when the report is at most
// probe.DefaultReportMaxAge old (a member that stopped reporting a minute
// ago no longer counts in the group's), else nil.
func (c *Controller) lastReport(group string, now time.Time, mv *api.MemberView) []probe.PathCount {
	if c.watch == nil {
		return nil
	}
	ms, ok := c.watch.State(group, mv.Name)
	if !ok {
		return nil
	}
	mv.Since = ms.LastChange
	if !ms.HasReport {
		return nil
	}
	r := ms.Report
	top := r.Top
	r.Top = nil
	mv.LastReport, mv.Rescued = &r, r.Rescued
	age := now.Sub(r.Time)
	mv.ReportAge = math.Round(age.Seconds()*10) / 10
	if age > probe.DefaultReportMaxAge {
		return nil
	}
	return top
}

// finiteOrZero is x, or 0 when JSON can not carry it (a member without
// capacity, which Build does not let through).
func finiteOrZero(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// List is the GROUP-QUERY summary of every group.
func (c *Controller) List() api.GroupList {
	out := api.GroupList{Groups: []api.GroupSummary{}}
	set := c.current.Load()
	if set == nil {
		return out
	}
	for _, gc := range set.Config.Groups {
		g := set.Group(gc.Name)
		live, _ := c.disp.Live(g.Name)
		s := api.GroupSummary{Name: g.Name, Policy: g.Policy.Name, Members: len(g.Members), FailOpen: c.disp.FailingOpen(g.Name)}
		for _, m := range g.Members {
			if st := live[m.Name].State; st.State == probe.StateUp && st.Answered() {
				s.Up++
			}
		}
		out.Groups = append(out.Groups, s)
	}
	return out
}
