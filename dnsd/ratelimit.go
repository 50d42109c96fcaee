package dnsd

import (
	"net/netip"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/dnsd/rrl"
)

// rrlAction asks the snapshot's rate limiter about a UDP reply of kind
// for name to client and counts what it says; in log-only mode
// everything is sent.
func (s *Server) rrlAction(snap *snapshot, client netip.Addr, kind rrl.Kind, name string) rrl.Action {
	a := snap.rrl.Decide(client, kind, name, s.now())
	if a == rrl.Send {
		return a
	}
	if snap.rrl.Config().LogOnly {
		s.m.rrl.WithLabelValues(kind.String(), rrlLogged).Inc()
		return rrl.Send
	}
	label := rrlDropped
	if a == rrl.Slip {
		label = rrlSlipped
	}
	s.m.rrl.WithLabelValues(kind.String(), label).Inc()
	return a
}

// rrlKind says what kind of response m is and the name its bucket is
// counted by: the query name for answers and NODATA, the zone (the SOA
// owner) for NXDOMAIN, the delegation for referrals, nothing for errors.
func rrlKind(m *dns.Msg) (rrl.Kind, string) {
	qname := ""
	if len(m.Question) == 1 {
		qname = m.Question[0].Name
	}
	authority := func(t uint16) (string, bool) {
		for _, rr := range m.Ns {
			if rr.Header().Rrtype == t {
				return rr.Header().Name, true
			}
		}
		return "", false
	}
	switch {
	case m.Rcode == dns.RcodeNameError:
		if zone, ok := authority(dns.TypeSOA); ok {
			return rrl.NXDomain, zone
		}
		return rrl.NXDomain, qname
	case m.Rcode != dns.RcodeSuccess:
		return rrl.Error, ""
	case len(m.Answer) > 0:
		return rrl.Answer, qname
	}
	if cut, ok := authority(dns.TypeNS); ok && !m.Authoritative {
		return rrl.Referral, cut
	}
	return rrl.NoData, qname
}

// slipped is m truncated for a slip: the header with TC, the question and
// the OPT record, no records (a real client retries over TCP).
func slipped(m *dns.Msg) *dns.Msg {
	out := &dns.Msg{MsgHdr: m.MsgHdr, Question: m.Question, Compress: true}
	out.Truncated = true
	for _, rr := range m.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			out.Extra = append(out.Extra, rr)
		}
	}
	return out
}
