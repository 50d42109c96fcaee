package dnsd

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/zones"
)

// maxChain bounds the CNAME records followed inside a zone.
const maxChain = 8

// auth answers class IN from the snapshot's zones and groups, in the
// manner of CoreDNS's file plugin. Names outside every zone are REFUSED.
type auth struct {
	set    *zones.Set
	groups GroupAnswerer
	negSOA map[*zones.Zone]*dns.SOA
	addrs  sync.Pool // *[]netip.Addr, room for group answers
}

var _ Handler = (*auth)(nil)

func (a *auth) Name() string { return "auth" }

func (a *auth) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q := r.Question[0]
	if q.Qclass != dns.ClassINET {
		return dns.RcodeRefused, nil
	}
	z := a.set.Find(q.Name)
	if z == nil {
		return dns.RcodeRefused, nil
	}
	info := infoFrom(ctx, w)
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	rcode, err := a.answer(ctx, z, dns.CanonicalName(q.Name), q.Qtype, info, m)
	if err != nil {
		return dns.RcodeServerFailure, err
	}
	m.Rcode = rcode
	return rcode, w.WriteMsg(m)
}

// answer fills m for qname/qtype, following in-zone CNAMEs.
func (a *auth) answer(ctx context.Context, z *zones.Zone, qname string, qtype uint16, info *reqInfo, m *dns.Msg) (int, error) {
	name := qname
	var seen []string
	for hop := 0; ; hop++ {
		next, rcode, err := a.lookup(ctx, z, name, qtype, info, m, hop == 0)
		if err != nil || next == "" {
			return rcode, err
		}
		seen = append(seen, name)
		// Stop at the bound, on a loop, when the chain leaves the zone or
		// enters a delegation: the resolver takes it from there.
		if hop+1 >= maxChain || slices.Contains(seen, next) || !dns.IsSubDomain(z.Origin, next) || z.Cut(next) != "" {
			return dns.RcodeSuccess, nil
		}
		name = next
	}
}

// lookup adds the answer for one name to m. It returns the CNAME target
// to follow, if any, and the rcode.
func (a *auth) lookup(ctx context.Context, z *zones.Zone, name string, qtype uint16, info *reqInfo, m *dns.Msg, first bool) (string, int, error) {
	if cut := z.Cut(name); cut != "" {
		if qtype != dns.TypeDS || name != cut {
			if first {
				a.referral(z, cut, m)
			}
			return "", dns.RcodeSuccess, nil
		}
		// DS at the cut is answered from the parent side (RFC 4035 §3.1.4.1).
		if ds := z.RRset(cut, dns.TypeDS); len(ds) > 0 {
			m.Answer = append(m.Answer, ds...)
		} else {
			a.negative(z, m)
		}
		return "", dns.RcodeSuccess, nil
	}
	node := z.Node(name)
	if a.set.Group(name) != nil {
		switch qtype {
		case dns.TypeA, dns.TypeAAAA:
			return "", dns.RcodeSuccess, a.group(ctx, z, name, qtype, info, m)
		case dns.TypeANY:
			return "", dns.RcodeSuccess, a.groupANY(ctx, z, node, name, info, m)
		}
	}
	synth := false
	if node == nil {
		if z.Exists(name) || a.set.Group(name) != nil {
			a.negative(z, m) // empty non-terminal or group name: NODATA
			return "", dns.RcodeSuccess, nil
		}
		if node = z.Wildcard(name); node == nil {
			a.negative(z, m)
			return "", dns.RcodeNameError, nil
		}
		synth = true
	}
	rrset := func(t uint16) []dns.RR {
		rrs := node.RRsets[t]
		if !synth {
			return rrs
		}
		out := make([]dns.RR, len(rrs))
		for i, rr := range rrs {
			out[i] = dns.Copy(rr)
			out[i].Header().Name = name // RFC 4592 §3.4.1: owner is the qname
		}
		return out
	}
	if qtype == dns.TypeANY {
		types := sortedTypes(node)
		if len(types) == 0 {
			a.negative(z, m)
			return "", dns.RcodeSuccess, nil
		}
		if !info.tcp {
			types = types[:1] // RFC 8482 §4.1
		}
		for _, t := range types {
			m.Answer = append(m.Answer, rrset(t)...)
		}
		return "", dns.RcodeSuccess, nil
	}
	if cn := node.RRsets[dns.TypeCNAME]; len(cn) > 0 && qtype != dns.TypeCNAME {
		m.Answer = append(m.Answer, rrset(dns.TypeCNAME)...)
		return dns.CanonicalName(cn[0].(*dns.CNAME).Target), dns.RcodeSuccess, nil
	}
	rrs := rrset(qtype)
	if len(rrs) == 0 {
		a.negative(z, m)
		return "", dns.RcodeSuccess, nil
	}
	m.Answer = append(m.Answer, rrs...)
	if qtype == dns.TypeNS || qtype == dns.TypeMX {
		a.additional(z, rrs, m)
	}
	return "", dns.RcodeSuccess, nil
}

func sortedTypes(n *zones.Node) []uint16 {
	types := make([]uint16, 0, len(n.RRsets))
	for t, rrs := range n.RRsets {
		if len(rrs) > 0 {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	return types
}

// group adds the group's answer for qtype A or AAAA.
func (a *auth) group(ctx context.Context, z *zones.Zone, name string, qtype uint16, info *reqInfo, m *dns.Msg) error {
	ga, done, err := a.answerGroup(ctx, name, qtype, info)
	defer done()
	if err != nil {
		return fmt.Errorf("dnsd: group %s: %w", name, err)
	}
	if scope := info.groupScope(ga); scope >= 0 {
		setScope(m, info, scope)
	}
	n := len(m.Answer)
	var b [16]byte
	for _, addr := range ga.Addrs {
		rd := groupRdata(qtype, addr, &b)
		if rd == nil {
			continue
		}
		hdr := dns.RR_Header{Name: name, Rrtype: qtype, Class: dns.ClassINET, Ttl: ga.TTL}
		ip := net.IP(append([]byte(nil), rd...))
		if qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: ip})
		} else {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: ip})
		}
	}
	if len(m.Answer) == n {
		a.negative(z, m)
	}
	return nil
}

// answerGroup is the group's answer to the query: the one the fast path
// already got, when it left the reply to the slow path (so that a query
// is one decision: booked, counted and picked once), else the
// answerer's. done returns the room of the answer's addresses, once
// they are copied.
func (a *auth) answerGroup(ctx context.Context, name string, qtype uint16, info *reqInfo) (ga GroupAnswer, done func(), err error) {
	if d := info.decided; d != nil && d.name == name && d.qtype == qtype {
		info.decided = nil
		return d.ga, func() {}, d.err
	}
	buf, _ := a.addrs.Get().(*[]netip.Addr)
	if buf == nil {
		buf = new([]netip.Addr)
	}
	ga, err = a.groups.AnswerGroup(ctx, GroupQuery{Group: name, Qtype: qtype, Client: info.client, ECS: info.ecs, Addrs: *buf})
	if err == nil {
		*buf = ga.Addrs[:0] // keep what grew for the next answer
	}
	return ga, func() { a.addrs.Put(buf) }, err
}

// groupANY answers ANY at a group name: over UDP one RRset (the A answer,
// else AAAA, else a static RRset), over TCP both families and the static
// records.
func (a *auth) groupANY(ctx context.Context, z *zones.Zone, node *zones.Node, name string, info *reqInfo, m *dns.Msg) error {
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		n, ns := len(m.Answer), len(m.Ns)
		if err := a.group(ctx, z, name, t, info, m); err != nil {
			return err
		}
		m.Ns = m.Ns[:ns]
		if !info.tcp && len(m.Answer) > n {
			return nil
		}
	}
	if node != nil {
		for _, t := range sortedTypes(node) {
			if t == dns.TypeA || t == dns.TypeAAAA {
				continue
			}
			m.Answer = append(m.Answer, node.RRsets[t]...)
			if !info.tcp {
				break
			}
		}
	}
	if len(m.Answer) == 0 {
		a.negative(z, m)
	}
	return nil
}

// referral fills m with the delegation at cut: its NS records in the
// authority section, glue in the additional section, AA off.
func (a *auth) referral(z *zones.Zone, cut string, m *dns.Msg) {
	m.Authoritative = false
	ns := z.RRset(cut, dns.TypeNS)
	m.Ns = append(m.Ns, ns...)
	a.additional(z, ns, m)
}

// additional adds A and AAAA records of in-zone NS and MX targets.
func (a *auth) additional(z *zones.Zone, rrs []dns.RR, m *dns.Msg) {
	for i, rr := range rrs {
		var target string
		switch rr := rr.(type) {
		case *dns.NS:
			target = rr.Ns
		case *dns.MX:
			target = rr.Mx
		default:
			continue
		}
		target = dns.CanonicalName(target)
		if !dns.IsSubDomain(z.Origin, target) || slices.ContainsFunc(rrs[:i], func(p dns.RR) bool { return sameTarget(p, target) }) {
			continue
		}
		m.Extra = append(m.Extra, z.RRset(target, dns.TypeA)...)
		m.Extra = append(m.Extra, z.RRset(target, dns.TypeAAAA)...)
	}
}

func sameTarget(rr dns.RR, target string) bool {
	switch rr := rr.(type) {
	case *dns.NS:
		return dns.CanonicalName(rr.Ns) == target
	case *dns.MX:
		return dns.CanonicalName(rr.Mx) == target
	}
	return false
}

// negative adds the zone's SOA, TTL already min(TTL, MINIMUM) (RFC 2308 §3),
// to the authority section.
func (a *auth) negative(z *zones.Zone, m *dns.Msg) {
	if soa := a.negSOA[z]; soa != nil {
		m.Ns = append(m.Ns, soa)
	}
}

// setScope puts the client subnet option into m's OPT record with the
// scope the answer depended on; with several group answers in one reply
// (ANY over TCP) the widest dependence wins. The edge keeps it.
func setScope(m *dns.Msg, info *reqInfo, scope int) {
	var opt *dns.OPT
	for _, rr := range m.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			opt = o
			break
		}
	}
	if opt == nil {
		opt = &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		m.Extra = append(m.Extra, opt)
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_SUBNET); ok {
			e.SourceScope = max(e.SourceScope, ecsOption(info, scope).SourceScope)
			return
		}
	}
	opt.Option = append(opt.Option, ecsOption(info, scope))
}
