package dnsd

import (
	"context"

	"github.com/miekg/dns"
)

// chaos answers class CH: TXT id.server./hostname.bind. with the identity
// and version.bind./version.server. with the version; an empty value and
// every other CH question are REFUSED. Other classes go to next.
type chaos struct {
	identity, version string
	next              Handler
}

var _ Handler = (*chaos)(nil)

func (c *chaos) Name() string { return "chaos" }

func (c *chaos) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q := r.Question[0]
	if q.Qclass != dns.ClassCHAOS {
		return c.next.ServeDNS(ctx, w, r)
	}
	if q.Qtype != dns.TypeTXT && q.Qtype != dns.TypeANY {
		return dns.RcodeRefused, nil
	}
	var txt string
	switch dns.CanonicalName(q.Name) {
	case "id.server.", "hostname.bind.":
		txt = c.identity
	case "version.bind.", "version.server.":
		txt = c.version
	}
	if txt == "" {
		return dns.RcodeRefused, nil
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	m.Answer = []dns.RR{&dns.TXT{
		Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS},
		Txt: splitTXT(txt),
	}}
	return dns.RcodeSuccess, w.WriteMsg(m)
}

// splitTXT cuts s into character-strings of at most 255 bytes.
func splitTXT(s string) []string {
	var out []string
	for len(s) > 255 {
		out = append(out, s[:255])
		s = s[255:]
	}
	return append(out, s)
}
