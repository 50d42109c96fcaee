package dnsd

import (
	"github.com/miekg/dns"
)

// fit makes m no larger than size: it drops the additional records first
// (without TC) unless m is a referral, whose glue is required (RFC 9471),
// then truncates with TC. It reports whether TC was set.
func (ew *edgeWriter) fit(m *dns.Msg, size int) bool {
	if m.Len() <= size {
		return false
	}
	referral := !m.Authoritative && len(m.Answer) == 0 && len(m.Ns) > 0 && m.Ns[0].Header().Rrtype == dns.TypeNS
	if !referral {
		kept := m.Extra[:0:0]
		for _, rr := range m.Extra {
			if rr.Header().Rrtype == dns.TypeOPT {
				kept = append(kept, rr)
			}
		}
		m.Extra = kept
		if m.Len() <= size {
			return false
		}
	}
	m.Truncate(size)
	m.Compress = true
	return m.Truncated
}
