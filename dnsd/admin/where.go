package admin

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
)

// Contents is what the admin API needs of dnsd's content map
// (implemented by mirror/contentmap's Map): what the members of a group hold
// under an index path.
type Contents interface {
	Lookup(group, path string) contentmap.Lookup
}

var _ Contents = (*contentmap.Map)(nil)

// whereAPI serves api.GroupWhere and api.GroupMirrorList from the group
// view (Membership), the content map (Contents) and, for the mirror
// list's order, the policy (Explainer).
type whereAPI struct {
	m   Membership
	c   Contents
	ex  Explainer // nil: the view's order
	now func() time.Time
}

func (a *whereAPI) register(mux *http.ServeMux) {
	mux.HandleFunc(api.GroupWhere.Pattern(), a.where)
	mux.HandleFunc(api.GroupMirrorList.Pattern(), a.mirrorList)
}

// lookup answers a request of a path in a group: the Where, or the
// error reply already written.
func (a *whereAPI) lookup(w http.ResponseWriter, r *http.Request) (api.Where, bool) {
	asked := r.URL.Query().Get(api.PathParam)
	rel, err := content.RequestPath(asked)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, api.ErrorReply{Error: fmt.Sprintf("%v (want a URL path such as /dists/stable/InRelease)", err)})
		return api.Where{}, false
	}
	v, err := a.m.View(r.PathValue(api.GroupParam))
	if err != nil {
		writeError(w, err)
		return api.Where{}, false
	}
	return whereOf(v, "/"+rel, a.c.Lookup(v.Name, rel), a.now()), true
}

// whereOf is the answer of api.GroupWhere for the path p (an index path
// with its leading "/") in the group of view v, from what the content
// map knows (lk): the holders in the view's order, each marked Best when
// its copy is the same as content.BestCopy of them all.
func whereOf(v api.GroupView, p string, lk contentmap.Lookup, now time.Time) api.Where {
	out := api.Where{Group: v.Name, Path: p, Time: now, Holders: []api.WhereMember{}, Lacking: []string{}, Unknown: []string{}}
	best, _ := content.BestCopy(lk.Copies)
	for _, m := range v.Members {
		c, ok := lk.Copies[m.Name]
		switch {
		case ok:
			wm := api.WhereMember{Name: m.Name, Host: m.Host, Size: c.Size, ModTime: c.ModTime.UTC(),
				Best: c.Same(best), State: m.State, Generation: m.Generation, Lag: m.Lag, Country: m.Location.Country}
			if m.LastReport != nil {
				wm.Schemes = m.LastReport.Schemes
			}
			out.Holders = append(out.Holders, wm)
		case lk.Indexed[m.Name]:
			out.Lacking = append(out.Lacking, m.Name)
		default:
			out.Unknown = append(out.Unknown, m.Name)
		}
	}
	return out
}

func (a *whereAPI) where(w http.ResponseWriter, r *http.Request) {
	if wh, ok := a.lookup(w, r); ok {
		writeJSON(w, http.StatusOK, wh)
	}
}

// mirrorList serves api.GroupMirrorList: the holders of the best copy,
// ordered by the policy for the client (?client=IP, else the request's
// address).
func (a *whereAPI) mirrorList(w http.ResponseWriter, r *http.Request) {
	wh, ok := a.lookup(w, r)
	if !ok {
		return
	}
	order := a.order(wh.Group, clientOf(r))
	l, ok := mirrorListOf(wh, order, a.now())
	if !ok {
		writeJSON(w, http.StatusNotFound, api.ErrorReply{Error: fmt.Sprintf("%s: no member holds %s", wh.Group, wh.Path)})
		return
	}
	api.ServeMirrorList(w, r, l)
}

// mirrorListOf is the mirror list of wh's best copy: the holders of it as
// https://HOST/PATH when their reports say they serve https, else
// http://HOST/PATH, with their country, those in order (member names, the policy's order for
// the client) first in that order, the others in wh's order; false when
// nobody holds the file.
func mirrorListOf(wh api.Where, order []string, now time.Time) (api.MirrorList, bool) {
	var best []api.WhereMember
	for _, h := range wh.Holders {
		if h.Best {
			best = append(best, h)
		}
	}
	if len(best) == 0 {
		return api.MirrorList{}, false
	}
	rank := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(best, func(x, y api.WhereMember) int { return rank(x.Name) - rank(y.Name) })
	l := api.MirrorList{Name: path.Base(wh.Path), Size: best[0].Size, Modified: best[0].ModTime, Published: now, Generator: "transmirror dnsd"}
	for _, h := range best {
		scheme := probe.SchemeHTTP
		if (probe.Report{Schemes: h.Schemes}).Serves(probe.SchemeHTTPS) {
			scheme = probe.SchemeHTTPS // a member that serves https is listed so
		}
		u := scheme + "://" + strings.TrimSuffix(h.Host, ".") + escapePath(wh.Path) // a host name as a URL writes it
		l.URLs = append(l.URLs, api.MirrorURL{URL: u, Location: h.Country})
	}
	return l, true
}

// escapePath escapes p for a URL, segment by segment.
func escapePath(p string) string { return (&url.URL{Path: p}).EscapedPath() }

// order is the members of group in the order the policy answers client
// with: those it picks, in its order, then the others in the
// explanation's order; nil without an Explainer or a client.
func (a *whereAPI) order(group string, client netip.Addr) []string {
	if a.ex == nil || !client.IsValid() {
		return nil
	}
	qtype := dns.TypeA
	if client.Is6() && !client.Is4In6() {
		qtype = dns.TypeAAAA
	}
	e, err := a.ex.Explain(group, qtype, client.Unmap(), netip.Prefix{})
	if err != nil {
		return nil
	}
	order := slices.Clone(e.Answer)
	for _, m := range e.Members {
		if !slices.Contains(order, m.Name) {
			order = append(order, m.Name)
		}
	}
	return order
}

// clientOf is the ?client= address, else the request's remote address.
func clientOf(r *http.Request) netip.Addr {
	if a, err := netip.ParseAddr(r.URL.Query().Get(api.ClientParam)); err == nil {
		return a
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(host)
	return a
}
