package dispatch

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe/api"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/scheduler"
	"github.com/transmirror/transmirror/zones"
)

// Explain answers a group question the way AnswerGroup would, without
// counting it, and says why. ecs may be the zero Prefix.
func (d *Dispatcher) Explain(group string, qtype uint16, client netip.Addr, ecs netip.Prefix) (api.Explanation, error) {
	g := d.groups()[dns.CanonicalName(group)]
	if g == nil {
		return api.Explanation{}, fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, group)
	}
	now := d.now()
	q := dnsd.GroupQuery{Group: g.cfg.Name, Qtype: qtype, Client: client, ECS: ecs}
	c := d.locate(q, g.policy.DependsOn())
	low, high := g.cfg.Policy.LowWatermark, g.cfg.Policy.HighWatermark
	if low == 0 {
		low = scheduler.DefaultLowWatermark
	}
	if high == 0 {
		high = scheduler.DefaultHighWatermark
	}
	e := api.Explanation{
		Group: g.cfg.Name, Policy: g.cfg.Policy.Name, Qtype: dns.TypeToString[qtype],
		Client: client.String(), ClientPrefix: c.prefix.String(), Source: c.res.Source,
		ECSUse: c.ecs, Scope: c.scope, TTL: g.cfg.TTL.Max,
		Watermarks: api.Watermarks{Low: low, High: high},
	}
	if ecs.IsValid() {
		e.ECS = ecs.String()
	}
	if l := c.res.Loc; l.HasCoords {
		e.Location.Lat, e.Location.Lon = &l.Lat, &l.Lon
	}
	e.Location.Country, e.Location.Continent = c.res.Loc.Country, c.res.Loc.Continent
	f := g.fam[familyOf(qtype)]
	if len(f.idx) == 0 {
		e.Why = fmt.Sprintf("no member has a %s address: NODATA", e.Qtype)
		return e, nil
	}
	if f.drained {
		e.Why = fmt.Sprintf("every member with a %s address is drained and the group has when_all_drained: nodata: NODATA", e.Qtype)
		return e, nil
	}
	rng := rand.New(rand.NewPCG(d.seed, 0))
	picked, failOpen := g.policy.Pick(f.group, scheduler.Query{
		Client: scheduler.Client{Loc: c.res.Loc, Key: scheduler.ScopeKey(c.prefix)},
		N:      answersOf(g.cfg), Rand: rng, Now: now,
		Load: f.src[srcOwn], Also: f.src[srcOwn+1:],
	}, nil)
	a := g.rates.Peek(c.prefix, f.scopeAnswer(g.cfg, familyOf(qtype), picked), now)
	e.TTL = a.TTL
	e.FailOpen = failOpen
	isPicked := make(map[int]bool)
	for _, k := range picked {
		isPicked[k] = true
		e.Answer = append(e.Answer, g.cfg.Members[f.idx[k]].Name)
	}
	for _, a := range answerAddrs(nil, f.addrs, picked, answersOf(g.cfg)) {
		e.Addresses = append(e.Addresses, a.String())
	}
	for k, i := range f.idx {
		e.Members = append(e.Members, explainMember(g, f, k, i, c.res.Loc, isPicked[k], e.Watermarks, now))
	}
	e.Why = why(g.cfg.Policy.Name, e) + ttlWhy(a, f.up, g.cfg.TTL)
	return e, nil
}

// explainMember is the explanation of member k of family f (the group's
// member i): its state and figures, and a note on why it was or was not
// picked given the watermarks w.
func explainMember(g *dgroup, f *family, k, i int, loc scheduler.Location, picked bool, w api.Watermarks, now time.Time) api.ExplainedMember {
	m := g.cfg.Members[i]
	st := g.states[i]
	pending := f.pending(k, now)
	fig := scheduler.Figures{
		Load: st.Load, Pending: pending, Capacity: m.Capacity,
		BytesPerSecond: st.BytesPerSecond, Bandwidth: m.Bandwidth.BytesPerSecond(),
	}
	util := fig.Utilization()
	em := api.ExplainedMember{
		Name: m.Name, State: st.Name(), Load: st.Load, Pending: api.Round2(pending),
		Capacity: m.Capacity, BytesPerSecond: st.BytesPerSecond, Bandwidth: fig.Bandwidth,
		Weight: m.Weight, Utilization: api.Round2(util), Picked: picked,
		DistanceKm: math.Round(scheduler.DistanceKm(loc, location(m.Location))),
	}
	// by says which capacity is the bound, when it is the uplink.
	by := ""
	if fig.BandwidthUtilization() > fig.LoadUtilization() {
		by = " by bandwidth"
	}
	switch {
	case !st.Answered():
		em.Note = "left out: " + st.Name()
	case util >= w.High:
		em.Note = fmt.Sprintf("at or above the high watermark (%.2f)%s: skipped while others have room", w.High, by)
	case util > w.Low:
		em.Note = fmt.Sprintf("between the watermarks%s: share reduced to %.0f%%", by, 100*(w.High-util)/(w.High-w.Low))
	default:
		em.Note = "has room"
	}
	return em
}

// ttlWhy says what the TTL came from: the scope's estimated request rate
// against one member's fair share of the group's.
func ttlWhy(a scheduler.ScopeAnswered, up int, b zones.TTLBounds) string {
	if !a.Seen {
		return fmt.Sprintf(" (a client prefix not seen before: ttl.unseen, within [%d, %d])", b.Min, b.Max)
	}
	how := "from the copies it keeps in cache"
	if a.Calibrated {
		how = "calibrated from the members' group requests"
	}
	return fmt.Sprintf(" (client prefix at %.3g requests/s, %s; group %.4g requests/s over %d members: %.3g fair shares of one member, max/(1 + x/%.1f) within [%d, %d])",
		a.Rate, how, a.Total, max(up, 1), a.X, scheduler.TTLRateScale, b.Min, b.Max)
}

func why(policy string, e api.Explanation) string {
	if e.FailOpen {
		return "no member is up: failing open, answering from all members"
	}
	var b strings.Builder
	switch policy {
	case "weighted":
		b.WriteString("weighted random draw over the members that are up, by static weight")
	case "least-load":
		b.WriteString("the members with the lowest utilization, counting the load of answers given since their last report")
	case "nearest":
		b.WriteString("the nearest members by great-circle distance, skipping those above the high watermark and thinning those between the watermarks")
	case "hash":
		fmt.Fprintf(&b, "rendezvous hash of the client prefix %s over the members that are up: stable per client", e.ClientPrefix)
	default:
		b.WriteString("the nearest tier of members with room (within 1000 km of the nearest), drawn by spare capacity; farther tiers only when it is full")
	}
	fmt.Fprintf(&b, "; client located by %s", e.Source)
	if e.ECS != "" {
		fmt.Fprintf(&b, " (ECS %s, %s)", e.ECS, e.ECSUse)
	}
	fmt.Fprintf(&b, "; TTL %d s", e.TTL)
	return b.String()
}
