package globalsim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler/geo"
)

// mirror is one simulated member: the chain a mirror runs, on the
// simulation's clock.
type mirror struct {
	name, host string
	rep        *probe.Reporter
	view       *viewBox
	sent       *group.SentMeter
	handler    http.Handler
}

// viewBox is the mirror's group view, a ViewSource the simulation sets.
type viewBox struct{ s *group.GroupSnapshot }

func (v *viewBox) Snapshot() *group.GroupSnapshot { return v.s }

// newMirror builds mirror i of s's config with the simulation's clock;
// one with holes in its tree knows what it and its siblings hold.
func newMirror(s *sim, i int, clock func() time.Time, loc *geo.Locator) (*mirror, error) {
	c, m := s.c, s.c.Mirrors[i]
	mm := &mirror{name: m.Name, host: mirrorHost(m), view: &viewBox{}, sent: group.NewSentMeter(0)}
	flows := group.NewFlowMeter(0)
	rep, err := probe.NewReporter(probe.ReporterConfig{
		Group: groupName, Member: m.Name, Capacity: m.Capacity,
		RunQueue: func() (float64, error) { return 0, nil }, Clock: clock, Serving: flows.Served,
	})
	if err != nil {
		return nil, fmt.Errorf("globalsim: mirror %s: %w", m.Name, err)
	}
	content := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if obj, ok := objectOf(r.URL.Path); !ok || !s.holds(i, obj) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		writeBody(w, s.size)
	})
	o := group.RedirectorOptions{
		Rules: group.RedirectRules{Group: groupName, Host: mm.host, Enabled: c.Correct, Law: c.Law, MaxShare: c.MaxShare},
		Next:  content, Load: group.NewLoadMeter(rep, m.Capacity, m.Bandwidth, time.Second), Flows: flows, View: mm.view,
		Locator: loc, Clock: clock, Rand: rand.New(rand.NewPCG(c.Seed, 0x6d6972726f72+uint64(i))),
	}
	if c.ContentIndex {
		o.Files, o.Contents = files{s, i}, contents{s, i}
	}
	rd, err := group.NewRedirector(o)
	if err != nil {
		return nil, fmt.Errorf("globalsim: mirror %s: %w", m.Name, err)
	}
	mm.rep, mm.handler = rep, rep.Wrap(rd)
	return mm, nil
}

// zeros is the body every response is written from: a response of n
// bytes is n bytes written (the reporter counts them for the bandwidth
// dnsd weighs), which costs nothing with a writer that keeps nothing.
var zeros = make([]byte, 1<<20)

// writeBody writes n bytes to w.
func writeBody(w http.ResponseWriter, n uint64) {
	w.Header().Set("Content-Length", strconv.FormatUint(n, 10))
	w.WriteHeader(http.StatusOK)
	for n > 0 {
		k := min(n, uint64(len(zeros)))
		_, _ = w.Write(zeros[:k])
		n -= k
	}
}

// response is a ResponseWriter that keeps the status and the headers
// only.
type response struct {
	h    http.Header
	code int
}

func (r *response) Header() http.Header { return r.h }
func (r *response) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *response) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(b), nil
}

// serve has m serve a GET of path on host from client (with a body of
// sim.size bytes); it returns the status and, for a redirect, the host
// it names.
func (m *mirror) serve(host, path string, client netip.Addr) (int, string, error) {
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: path}, Host: host, Proto: "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, RemoteAddr: netip.AddrPortFrom(client, 4321).String(), RequestURI: path}
	w := &response{h: http.Header{}}
	m.handler.ServeHTTP(w, req)
	if w.code != http.StatusFound {
		return w.code, "", nil
	}
	u, err := url.Parse(w.h.Get("Location"))
	if err != nil {
		return 0, "", fmt.Errorf("globalsim: %s: bad Location %q: %w", m.name, w.h.Get("Location"), err)
	}
	return w.code, u.Hostname(), nil
}
