package dnsd

import (
	"context"
	"strings"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/zones"
)

// Challenges is what the DNS side needs of the ACME DNS-01 challenges
// (implemented by acme.Served): the live values of a challenge name.
type Challenges interface {
	// TXT returns the values to answer a TXT query for qname with;
	// none when qname is not a challenge name or has no live value.
	TXT(qname string) []string
}

// challengeLabel is the first label of an ACME DNS-01 challenge name
// (RFC 8555 §8.4). The fast path never answers a name that starts with
// it: its answers change between snapshots.
const challengeLabel = "_acme-challenge"

// challengeTTL is the TTL of a served challenge value: a CA that asks
// again after a retry must see a removal soon.
const challengeTTL = 10

// isChallengeName reports whether name's first label is challengeLabel.
func isChallengeName(name string) bool {
	return len(name) > len(challengeLabel) && strings.EqualFold(name[:len(challengeLabel)+1], challengeLabel+".")
}

// challenge answers the names of live ACME challenges, in front of auth:
// TXT (and ANY) with the live values, authoritative; any other type with
// NODATA when the zone has nothing of its own there. A name without live
// values, or at or below a delegation, goes to next, which answers as the
// zone says (NXDOMAIN, NODATA, a static record).
type challenge struct {
	set    *zones.Set
	src    Challenges
	negSOA map[*zones.Zone]*dns.SOA
	next   Handler
}

var _ Handler = (*challenge)(nil)

func (c *challenge) Name() string { return "challenge" }

func (c *challenge) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q := r.Question[0]
	if q.Qclass != dns.ClassINET || !isChallengeName(q.Name) {
		return c.next.ServeDNS(ctx, w, r)
	}
	name := dns.CanonicalName(q.Name)
	z := c.set.Find(name)
	if z == nil || z.Cut(name) != "" {
		return c.next.ServeDNS(ctx, w, r)
	}
	values := c.src.TXT(name)
	if len(values) == 0 {
		return c.next.ServeDNS(ctx, w, r)
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	switch {
	case q.Qtype == dns.TypeTXT || q.Qtype == dns.TypeANY:
		for _, v := range values {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: challengeTTL}, Txt: []string{v}})
		}
	case z.Node(name) != nil:
		return c.next.ServeDNS(ctx, w, r) // the zone's own records there
	default:
		if soa := c.negSOA[z]; soa != nil {
			m.Ns = append(m.Ns, soa) // NODATA: the name exists, with TXT only
		}
	}
	return dns.RcodeSuccess, w.WriteMsg(m)
}
