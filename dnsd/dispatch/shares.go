package dispatch

import (
	"sync"
	"time"
)

// answerWindow is the window of answer shares, in one-second slots.
const answerWindow = 60

// answerCounts counts the answers that named each member over the last
// minute, in one-second slots. Memory: 60 × 16 bytes per member.
type answerCounts struct {
	mu sync.Mutex
	m  map[string]*answerRing
}

type answerRing struct {
	sec [answerWindow]int64
	n   [answerWindow]uint64
}

func newAnswerCounts() *answerCounts { return &answerCounts{m: make(map[string]*answerRing)} }

func (a *answerCounts) add(member string, now time.Time) {
	s := now.Unix()
	i := s % answerWindow
	a.mu.Lock()
	r := a.m[member]
	if r == nil {
		r = &answerRing{}
		a.m[member] = r
	}
	if r.sec[i] != s {
		r.sec[i], r.n[i] = s, 0
	}
	r.n[i]++
	a.mu.Unlock()
}

// count returns the answers that named member in the last minute.
func (a *answerCounts) count(member string, now time.Time) uint64 {
	s := now.Unix()
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.m[member]
	if r == nil {
		return 0
	}
	var total uint64
	for i := range answerWindow {
		if s-r.sec[i] < answerWindow {
			total += r.n[i]
		}
	}
	return total
}
