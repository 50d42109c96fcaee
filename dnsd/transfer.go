package dnsd

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/zones"
)

// envelopeBytes bounds the uncompressed size of the records in one AXFR
// message.
const envelopeBytes = 32 << 10

// transfer answers AXFR and IXFR for zone apexes to allowed clients (see
// the package documentation for the choices); other queries go to next.
type transfer struct {
	set   *zones.Set
	allow map[string][]netip.Prefix
	next  Handler
}

var _ Handler = (*transfer)(nil)

func (t *transfer) Name() string { return "transfer" }

func (t *transfer) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q := r.Question[0]
	if q.Qtype != dns.TypeAXFR && q.Qtype != dns.TypeIXFR {
		return t.next.ServeDNS(ctx, w, r)
	}
	info := infoFrom(ctx, w)
	z := t.set.Zone(q.Name)
	if z == nil || z.SOA == nil || q.Qclass != dns.ClassINET || !t.allowed(z.Origin, info.client) {
		return dns.RcodeRefused, nil
	}
	if !info.tcp {
		if q.Qtype == dns.TypeAXFR {
			return dns.RcodeRefused, nil
		}
		// RFC 1995 §2: a UDP IXFR that does not fit gets the SOA alone.
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		m.Answer = []dns.RR{z.SOA}
		return dns.RcodeSuccess, w.WriteMsg(m)
	}
	rrs := z.Records() // SOA first
	var envs []*dns.Envelope
	var env []dns.RR
	size := 0
	for _, rr := range append(rrs[:len(rrs):len(rrs)], z.SOA) {
		n := dns.Len(rr)
		if size+n > envelopeBytes && len(env) > 0 {
			envs = append(envs, &dns.Envelope{RR: env})
			env, size = nil, 0
		}
		env = append(env, rr)
		size += n
	}
	envs = append(envs, &dns.Envelope{RR: env})
	ch := make(chan *dns.Envelope, len(envs))
	for _, e := range envs {
		ch <- e
	}
	close(ch)
	tr := new(dns.Transfer)
	if err := tr.Out(w, r, ch); err != nil {
		return dns.RcodeServerFailure, fmt.Errorf("dnsd: axfr %s: %w", z.Origin, err)
	}
	return dns.RcodeSuccess, nil
}

func (t *transfer) allowed(origin string, client netip.Addr) bool {
	for _, p := range t.allow[origin] {
		if p.Contains(client) {
			return true
		}
	}
	return false
}
