package api

import (
	"net/netip"
	"strings"

	"github.com/transmirror/transmirror/probe"
)

// Offers is what a member serves a redirected client on: the schemes of
// its public listeners (from its last report) and the address families of
// its addresses (from the view).
type Offers uint8

const (
	// OfferHTTP and OfferHTTPS: it serves the group name on http, https.
	OfferHTTP Offers = 1 << iota
	OfferHTTPS
	// OfferIPv4 and OfferIPv6: it has an address of the family (an A, an
	// AAAA record of its host name).
	OfferIPv4
	OfferIPv6
)

// Has reports whether o offers everything in need.
func (o Offers) Has(need Offers) bool { return o&need == need }

// OffersOf is what member m of a view offers: the schemes of its last
// report (none, or an older mirror's: http only), and the families of its
// addresses (none listed: both, as nothing says otherwise).
func OffersOf(m MemberView) Offers {
	var o Offers
	rep := probe.Report{}
	if m.LastReport != nil {
		rep = *m.LastReport
	}
	if rep.Serves(probe.SchemeHTTP) {
		o |= OfferHTTP
	}
	if rep.Serves(probe.SchemeHTTPS) {
		o |= OfferHTTPS
	}
	for _, a := range m.Addresses {
		if ip, err := netip.ParseAddr(a); err == nil {
			if ip.Unmap().Is4() {
				o |= OfferIPv4
			} else {
				o |= OfferIPv6
			}
		}
	}
	if o&(OfferIPv4|OfferIPv6) == 0 {
		o |= OfferIPv4 | OfferIPv6
	}
	return o
}

// NeedOf is what a sibling must offer a client that came with scheme
// (probe.SchemeHTTP or probe.SchemeHTTPS: a redirect keeps it, never downgrading)
// from address client (the zero address: either family): the scheme, and
// the client's family, so that an IPv6-only client is never sent to a
// sibling it can not reach.
func NeedOf(scheme string, client netip.Addr) Offers {
	need := OfferHTTP
	if scheme == probe.SchemeHTTPS {
		need = OfferHTTPS
	}
	switch {
	case !client.IsValid():
	case client.Unmap().Is4():
		need |= OfferIPv4
	default:
		need |= OfferIPv6
	}
	return need
}

// Strings are o's names, schemes first: http, https, IPv4, IPv6.
func (o Offers) Strings() []string {
	var out []string
	for _, n := range []struct {
		o    Offers
		name string
	}{{OfferHTTP, "http"}, {OfferHTTPS, "https"}, {OfferIPv4, "IPv4"}, {OfferIPv6, "IPv6"}} {
		if o.Has(n.o) {
			out = append(out, n.name)
		}
	}
	return out
}

// FilterOf is the redirect filter for a client at address client over
// the members of view v.
func FilterOf(v GroupView, client netip.Addr) *RedirectFilter {
	f := &RedirectFilter{Family: "IPv4", HTTP: []string{}, HTTPS: []string{}}
	if !client.Unmap().Is4() {
		f.Family = "IPv6"
	}
	for _, m := range v.Members {
		o := OffersOf(m)
		var from []string
		for _, s := range []struct {
			scheme string
			list   *[]string
		}{{probe.SchemeHTTP, &f.HTTP}, {probe.SchemeHTTPS, &f.HTTPS}} {
			if o.Has(NeedOf(s.scheme, client)) {
				*s.list = append(*s.list, m.Name)
			} else {
				from = append(from, s.scheme)
			}
		}
		if len(from) > 0 {
			f.Excluded = append(f.Excluded, ExcludedMember{Name: m.Name, From: from, Reason: excludedWhy(o, f.Family)})
		}
	}
	return f
}

// excludedWhy says what a member offering o lacks for a client of family.
func excludedWhy(o Offers, family string) string {
	fam := OfferIPv4
	if family == "IPv6" {
		fam = OfferIPv6
	}
	var lacks []string
	if !o.Has(fam) {
		lacks = append(lacks, "no "+family+" address")
	}
	if !o.Has(OfferHTTPS) {
		lacks = append(lacks, "no https in its reports")
	}
	if !o.Has(OfferHTTP) {
		lacks = append(lacks, "no plain http")
	}
	return strings.Join(lacks, ", ")
}
