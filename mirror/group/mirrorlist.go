package group

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"path"
	"time"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler"
)

// Ranked is a candidate of a GroupSnapshot in the policy's order.
type Ranked struct {
	Host, Member string
	Country      string // ISO 3166-1 alpha-2, "" when the view has none
	Offers       api.Offers
}

// Ranked returns every candidate in the order the group's policy gives
// client with rnd (counting the redirects booked until now): the order
// of a mirror list.
func (s *GroupSnapshot) Ranked(client scheduler.Client, rnd *rand.Rand, now time.Time) []Ranked {
	n := s.group.Len()
	if n == 0 {
		return nil
	}
	country := make(map[string]string, len(s.View.Members))
	for _, m := range s.View.Members {
		country[m.Name] = m.Location.Country
	}
	picked, _ := s.policy.Pick(s.group, scheduler.Query{Client: client, N: n, Rand: rnd, Now: now, Load: s.booked}, make([]int, 0, n))
	out := make([]Ranked, 0, len(picked))
	for _, i := range picked {
		out = append(out, Ranked{Host: s.hosts[i], Member: s.names[i], Country: country[s.names[i]], Offers: s.offers[i]})
	}
	return out
}

// isMirrorList reports whether r asks for the mirror list of its path
// (?mirrorlist, api.MirrorListParam), on any host name.
func isMirrorList(r *http.Request) bool {
	return r.URL.RawQuery != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.URL.Query().Has(api.MirrorListParam)
}

// serveMirrorList answers ?mirrorlist: the members that hold the path's
// best copy (Holdings; every member when nothing is known) as Metalink
// or text (api.ServeMirrorList): this mirror first when it holds it (DNS
// sent the client here), then the view's candidates in the policy's
// order for the client, each URL as a redirect to it would be. A path
// that names no file, or one that nobody holds, is a 404.
func (rd *Redirector) serveMirrorList(w http.ResponseWriter, r *http.Request, cur *redirectConfig, snap *GroupSnapshot, now time.Time, rnd *rand.Rand) {
	rules := &cur.rules
	if _, err := content.RequestPath(r.URL.Path); err != nil {
		http.Error(w, "not a file: "+err.Error(), http.StatusNotFound)
		return
	}
	fw := ForwardedOf(r, rules.TrustedProxies)
	scheme := RequestScheme(rules.Scheme, r.TLS != nil, fw.Proto)
	bare := *r
	bare.URL = &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath}
	h, self := Holdings{}, true
	if rd.o.Contents != nil {
		h, self = rd.holdings(r, rules)
	}
	own, mine := rd.ownCopy(r)
	l := api.MirrorList{Name: path.Base(r.URL.Path), Size: -1, Published: now.UTC(), Generator: "transmirror mirror"}
	if best, ok := h.Best(); ok {
		l.Size, l.Modified = best.Size, best.ModTime
	} else if mine && rd.o.Files != nil {
		l.Size, l.Modified = own.Size, own.ModTime
	}
	if !rules.Dispatcher && self && mine {
		l.URLs = append(l.URLs, api.MirrorURL{URL: RedirectLocation(&bare, scheme, rules.Host)})
	}
	if snap != nil && !snap.Expired(now) {
		need := api.NeedOf(scheme, fw.Client)
		for _, c := range snap.Ranked(locateClient(fw.Client, cur.loc), rnd, now) {
			if c.Offers.Has(need) && h.Holds(c.Member) {
				l.URLs = append(l.URLs, api.MirrorURL{URL: RedirectLocation(&bare, scheme, c.Host), Location: c.Country})
			}
		}
	}
	api.ServeMirrorList(w, r, l)
}

// mirrorList is serveMirrorList on the current view.
func (rd *Redirector) mirrorList(w http.ResponseWriter, r *http.Request, cur *redirectConfig) {
	var snap *GroupSnapshot
	if rd.o.View != nil {
		snap = rd.o.View.Snapshot()
	}
	rd.serveMirrorList(w, r, cur, snap, rd.o.Clock(), rd.draw())
}
