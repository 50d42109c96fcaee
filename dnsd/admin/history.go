package admin

import (
	"sync"
	"time"

	"github.com/transmirror/transmirror/probe/api"
)

// History defaults: one point every 10 s, an hour of them.
const (
	DefaultHistoryInterval = 10 * time.Second
	DefaultHistoryPoints   = 360
)

// HistoryPoint is one sample of one member.
type HistoryPoint struct {
	// Time is when the sample was taken, in Unix seconds.
	Time int64 `json:"t"`
	// Answers is DNS answers per second that named the member since the
	// previous sample.
	Answers float64 `json:"a"`
	// Utilization is the member's utilization at the sample: the larger
	// of (load + hidden load) / capacity and bytes per second / bandwidth.
	Utilization float64 `json:"u"`
}

// MemberSample is what Record takes for one member.
type MemberSample struct {
	Group, Member string
	// AnswersTotal is the member's answers since dnsd started (a counter);
	// Record turns it into a rate.
	AnswersTotal uint64
	Utilization  float64
}

// History keeps the recent samples of every member in bounded rings (one
// per member, Points long); a member that is missing from a Record is
// forgotten. It is safe for concurrent use.
type History struct {
	points int

	mu     sync.Mutex
	series map[historyKey]*historyRing
	seq    uint64 // Records so far
}

type historyKey struct{ group, member string }

type historyRing struct {
	p         []HistoryPoint
	next      int
	full      bool
	lastTotal uint64
	lastTime  time.Time
}

// NewHistory returns an empty History keeping points samples per member
// (DefaultHistoryPoints when points <= 0).
func NewHistory(points int) *History {
	if points <= 0 {
		points = DefaultHistoryPoints
	}
	return &History{points: points, series: make(map[historyKey]*historyRing)}
}

// Record adds one sample taken at now for each member of samples and
// forgets the members that are not in it. The first sample of a member
// has no rate yet and only sets its baseline.
func (h *History) Record(now time.Time, samples []MemberSample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	seen := make(map[historyKey]bool, len(samples))
	for _, s := range samples {
		k := historyKey{s.Group, s.Member}
		seen[k] = true
		r := h.series[k]
		if r == nil {
			r = &historyRing{p: make([]HistoryPoint, h.points), lastTotal: s.AnswersTotal, lastTime: now}
			h.series[k] = r
			continue
		}
		var rate float64
		if dt := now.Sub(r.lastTime).Seconds(); dt > 0 && s.AnswersTotal >= r.lastTotal {
			rate = float64(s.AnswersTotal-r.lastTotal) / dt
		}
		r.lastTotal, r.lastTime = s.AnswersTotal, now
		r.p[r.next] = HistoryPoint{Time: now.Unix(), Answers: api.Round2(rate), Utilization: api.Round2(s.Utilization)}
		r.next = (r.next + 1) % len(r.p)
		r.full = r.full || r.next == 0
	}
	for k := range h.series {
		if !seen[k] {
			delete(h.series, k)
		}
	}
}

// Seq counts the Records so far; a reader that saw Seq n has nothing new
// to read until it changes.
func (h *History) Seq() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq
}

// Series returns the samples of every member of group by member name,
// oldest first.
func (h *History) Series(group string) map[string][]HistoryPoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]HistoryPoint)
	for k, r := range h.series {
		if k.group != group {
			continue
		}
		var pts []HistoryPoint
		if r.full {
			pts = append(pts, r.p[r.next:]...)
		}
		pts = append(pts, r.p[:r.next]...)
		if pts == nil {
			pts = []HistoryPoint{}
		}
		out[k.member] = pts
	}
	return out
}
