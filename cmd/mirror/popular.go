package main

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/popular"
	"github.com/transmirror/transmirror/probe"
)

// countPaths puts the most-requested counter in front of the public
// chain's redirect decision and makes it, with the requests the decision
// rescued, the source of the load reports' top and rescued. A member
// counts what it answers itself on the group name or its own host name (a
// request it redirects counts at the sibling that answers it); a
// dispatcher, which answers nothing but redirects and pushes no load
// report, counts the requests it redirects, for its own /v1/load.
func (w *wired) countPaths(cfg *mirror.Config, d deps, redirect http.Handler) (http.Handler, error) {
	c, err := popular.NewCounter(popular.CounterOptions{
		Hosts: []string{cfg.Group, cfg.Host}, Redirects: cfg.Dispatcher, Clock: d.clock, Registerer: d.reg,
	})
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	rescues, _ := redirect.(redirectCounts)
	w.reporter.SetPaths(reportPaths{counter: c, rescues: rescues})
	return c.Wrap(redirect), nil
}

// redirectCounts is what the load report needs of the redirect decision
// (a *group.Redirector): its redirects by reason since the start.
type redirectCounts interface {
	Counts() (redirected, skipped map[string]uint64)
}

var _ redirectCounts = (*group.Redirector)(nil)

// reportPaths is the load report's probe.PathSource: the counter's top,
// counts rounded to hundredths, and the redirects of reason rescue.
type reportPaths struct {
	counter *popular.Counter
	rescues redirectCounts // nil: none
}

var _ probe.PathSource = reportPaths{}

func (p reportPaths) Top(now time.Time) []probe.PathCount {
	var out []probe.PathCount
	for _, e := range p.counter.Top(now) {
		if c := math.Round(e.Guaranteed()*100) / 100; c > 0 {
			out = append(out, probe.PathCount{Path: e.Key, Count: c})
		}
	}
	return out
}

func (p reportPaths) Rescued() uint64 {
	if p.rescues == nil {
		return 0
	}
	redirected, _ := p.rescues.Counts()
	return redirected[group.ReasonRescue]
}
