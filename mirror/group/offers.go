package group

import (
	"net/netip"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
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
func OffersOf(m api.MemberView) Offers {
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
// (SchemeHTTP or SchemeHTTPS: a redirect keeps it, never downgrading)
// from address client (the zero address: either family): the scheme, and
// the client's family, so that an IPv6-only client is never sent to a
// sibling it can not reach.
func NeedOf(scheme string, client netip.Addr) Offers {
	need := OfferHTTP
	if scheme == SchemeHTTPS {
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
