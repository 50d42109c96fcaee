package admin

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/transmirror/transmirror/scheduler"
)

// DefaultMaxFlows bounds the (client country, member) pairs an AnswerFlows
// tracks per group; answers past it are counted under an unknown country.
const DefaultMaxFlows = 1024

// flowWindow is the window of answer flows, in one-second slots.
const flowWindow = 60

// Flow is how many answers of the last minute sent clients of one country
// to one member.
type Flow struct {
	// Country and Continent locate the clients ("" when unknown).
	Country   string `json:"country"`
	Continent string `json:"continent"`
	// Lat and Lon are the mean location of the clients when the locator
	// had coordinates for them (HasCoords).
	Lat       float64 `json:"lat"`
	Lon       float64 `json:"lon"`
	HasCoords bool    `json:"has_coords"`
	// Member is the member answered.
	Member string `json:"member"`
	// Answers is the count over the last minute.
	Answers uint64 `json:"answers"`
}

// AnswerFlows aggregates group answers by client country and member over
// the last minute, and counts every member's answers, for the dashboard's
// map and charts. Memory is bounded: at most MaxFlows pairs per group, each
// 60 one-second slots. Its Add is the Dispatcher's OnAnswer hook. It is
// safe for concurrent use.
type AnswerFlows struct {
	now      func() time.Time
	maxFlows int

	mu     sync.RWMutex
	groups map[string]*flowGroup
}

type flowGroup struct {
	mu     sync.Mutex
	flows  map[flowKey]*flowRing
	totals map[string]uint64 // member → answers since start
}

type flowKey struct{ country, continent, member string }

type flowRing struct {
	sec            [flowWindow]int64
	n              [flowWindow]uint64
	sumLat, sumLon float64
	coords         uint64
	lastSec        int64
}

// NewAnswerFlows returns an empty AnswerFlows tracking at most maxFlows
// pairs per group (DefaultMaxFlows when <= 0); now nil means time.Now.
func NewAnswerFlows(maxFlows int, now func() time.Time) *AnswerFlows {
	if maxFlows <= 0 {
		maxFlows = DefaultMaxFlows
	}
	if now == nil {
		now = time.Now
	}
	return &AnswerFlows{now: now, maxFlows: maxFlows, groups: make(map[string]*flowGroup)}
}

// maxCoordSamples caps the samples of a flow's mean location, so that the
// sums stay exact enough.
const maxCoordSamples = 1 << 20

// Add counts one answer of group that named member for a client at client.
func (a *AnswerFlows) Add(group, member string, client scheduler.Location) {
	now := a.now().Unix()
	a.mu.RLock()
	g := a.groups[group]
	a.mu.RUnlock()
	if g == nil {
		a.mu.Lock()
		if g = a.groups[group]; g == nil {
			g = &flowGroup{flows: make(map[flowKey]*flowRing), totals: make(map[string]uint64)}
			a.groups[group] = g
		}
		a.mu.Unlock()
	}
	k := flowKey{client.Country, client.Continent, member}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.totals[member]++
	r := g.flows[k]
	if r == nil {
		if len(g.flows) >= a.maxFlows {
			g.expire(now)
		}
		if len(g.flows) >= a.maxFlows {
			k = flowKey{member: member}
			client.HasCoords = false
		}
		if r = g.flows[k]; r == nil {
			r = &flowRing{}
			g.flows[k] = r
		}
	}
	i := now % flowWindow
	if r.sec[i] != now {
		r.sec[i], r.n[i] = now, 0
	}
	r.n[i]++
	r.lastSec = now
	if client.HasCoords && r.coords < maxCoordSamples {
		r.sumLat += client.Lat
		r.sumLon += client.Lon
		r.coords++
	}
}

// expire drops the flows with no answer in the window; g.mu held.
func (g *flowGroup) expire(now int64) {
	for k, r := range g.flows {
		if now-r.lastSec >= flowWindow {
			delete(g.flows, k)
		}
	}
}

// Flows returns the flows of group over the last minute, largest first.
func (a *AnswerFlows) Flows(group string) []Flow {
	now := a.now().Unix()
	a.mu.RLock()
	g := a.groups[group]
	a.mu.RUnlock()
	out := []Flow{}
	if g == nil {
		return out
	}
	g.mu.Lock()
	g.expire(now)
	for k, r := range g.flows {
		var n uint64
		for i := range flowWindow {
			if now-r.sec[i] < flowWindow {
				n += r.n[i]
			}
		}
		if n == 0 {
			continue
		}
		f := Flow{Country: k.country, Continent: k.continent, Member: k.member, Answers: n}
		if r.coords > 0 {
			f.Lat = math.Round(r.sumLat/float64(r.coords)*100) / 100
			f.Lon = math.Round(r.sumLon/float64(r.coords)*100) / 100
			f.HasCoords = true
		}
		out = append(out, f)
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(x, y Flow) int {
		return cmp.Or(cmp.Compare(y.Answers, x.Answers), cmp.Compare(x.Country, y.Country), cmp.Compare(x.Member, y.Member))
	})
	return out
}

// Total returns how many answers of group named member since the start.
func (a *AnswerFlows) Total(group, member string) uint64 {
	a.mu.RLock()
	g := a.groups[group]
	a.mu.RUnlock()
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.totals[member]
}

// Keep forgets every group that is not in members (group → member names)
// and every member of a kept group that is not listed, so that removed
// groups and members do not hold memory.
func (a *AnswerFlows) Keep(members map[string][]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, g := range a.groups {
		ms, ok := members[name]
		if !ok {
			delete(a.groups, name)
			continue
		}
		g.mu.Lock()
		for m := range g.totals {
			if !slices.Contains(ms, m) {
				delete(g.totals, m)
			}
		}
		for k := range g.flows {
			if !slices.Contains(ms, k.member) {
				delete(g.flows, k)
			}
		}
		g.mu.Unlock()
	}
}
