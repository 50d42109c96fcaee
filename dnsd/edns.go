package dnsd

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/netip"

	"github.com/miekg/dns"
)

// parseExtra checks the OPT and TSIG placement rules and reads the EDNS
// options into info. It returns the rcode to fail with, or success.
func (s *Server) parseExtra(r *dns.Msg, info *reqInfo) int {
	for _, sec := range [][]dns.RR{r.Answer, r.Ns} {
		for _, rr := range sec {
			if t := rr.Header().Rrtype; t == dns.TypeOPT || t == dns.TypeTSIG {
				return dns.RcodeFormatError
			}
		}
	}
	var opt *dns.OPT
	for i, rr := range r.Extra {
		switch rr := rr.(type) {
		case *dns.OPT:
			if opt != nil || rr.Hdr.Name != "." {
				return dns.RcodeFormatError // RFC 6891 §6.1.1
			}
			opt = rr
		case *dns.TSIG:
			if i != len(r.Extra)-1 {
				return dns.RcodeFormatError // RFC 8945 §5.1: TSIG is last
			}
		}
	}
	if opt == nil {
		return dns.RcodeSuccess
	}
	info.edns = true
	info.do = opt.Do()
	info.co = opt.Co()
	info.udpSize = int(opt.UDPSize())
	if opt.Version() != ednsVersion {
		return dns.RcodeBadVers
	}
	for _, o := range opt.Option {
		switch o := o.(type) {
		case *dns.EDNS0_COOKIE:
			b, err := hex.DecodeString(o.Cookie)
			// RFC 7873 §5.2.2: client cookie 8 bytes, server cookie 8 to 32.
			if err != nil || len(b) < 8 || len(b) > 40 || (len(b) > 8 && len(b) < 16) {
				return dns.RcodeFormatError
			}
			info.cookie = b[:8]
		case *dns.EDNS0_NSID:
			info.nsid = true
		case *dns.EDNS0_SUBNET:
			parseECS(o, info)
		}
	}
	return dns.RcodeSuccess
}

// parseECS reads a client subnet option; invalid ones are ignored.
func parseECS(o *dns.EDNS0_SUBNET, info *reqInfo) {
	var a netip.Addr
	switch o.Family {
	case 1:
		a, _ = netip.AddrFromSlice(o.Address.To4())
	case 2:
		a, _ = netip.AddrFromSlice(o.Address.To16())
	}
	info.setECS(o.Family, o.SourceNetmask, o.SourceScope, a)
}

func hasOption(opts []dns.EDNS0, code uint16) bool {
	for _, o := range opts {
		if o.Option() == code {
			return true
		}
	}
	return false
}

// ecsOption is the reply's client subnet option (RFC 7871 §7.2.1) for an
// answer that depended on the first scope bits of the client's address.
func ecsOption(info *reqInfo, scope int) *dns.EDNS0_SUBNET {
	return &dns.EDNS0_SUBNET{
		Code:          dns.EDNS0SUBNET,
		Family:        info.ecsFam,
		SourceNetmask: info.ecsSrc,
		SourceScope:   info.ecsScope(scope),
		Address:       net.IP(info.ecs.Masked().Addr().AsSlice()),
	}
}

// serverCookie returns client cookie + server cookie in hex (RFC 7873
// §4.2): the server part is HMAC-SHA256(secret, client cookie | address)
// cut to 8 bytes.
func (s *Server) serverCookie(info *reqInfo) string {
	h := hmac.New(sha256.New, s.cookie)
	h.Write(info.cookie)
	a := info.client.As16()
	h.Write(a[:])
	out := make([]byte, 0, 16)
	out = append(out, info.cookie...)
	out = h.Sum(out)[:16]
	return hex.EncodeToString(out)
}
