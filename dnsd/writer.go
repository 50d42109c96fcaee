package dnsd

import (
	"fmt"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/dnsd/rrl"
)

// edgeWriter finishes every reply a handler writes: header flags, question
// echo, OPT, truncation, TSIG, and it records what was written.
type edgeWriter struct {
	dns.ResponseWriter
	s       *Server
	snap    *snapshot
	req     *dns.Msg
	info    *reqInfo
	written bool
	limited bool // the rate limiter dropped the reply (written: nothing more to send)
	rcode   int
}

// WriteMsg finishes m and writes it.
func (ew *edgeWriter) WriteMsg(m *dns.Msg) error {
	ew.finish(m, true)
	if !ew.info.tcp && ew.snap != nil && ew.snap.rrl != nil {
		kind, name := rrlKind(m)
		switch ew.s.rrlAction(ew.snap, ew.info.client, kind, name) {
		case rrl.Drop:
			ew.written, ew.limited = true, true
			return nil
		case rrl.Slip:
			m = slipped(m)
		}
	}
	ew.record(m.Rcode)
	return ew.ResponseWriter.WriteMsg(m)
}

// Write writes a packed reply as is.
func (ew *edgeWriter) Write(b []byte) (int, error) {
	rc := dns.RcodeServerFailure
	if len(b) >= headerSize {
		rc = int(b[3] & 0xf)
	}
	ew.record(rc)
	return ew.ResponseWriter.Write(b)
}

func (ew *edgeWriter) record(rc int) {
	if !ew.written {
		ew.written, ew.rcode = true, rc
	}
}

// writeError writes a reply with rcode and clean flags: only ID, opcode
// and RD are copied, the question when there is exactly one.
func (ew *edgeWriter) writeError(rcode int) {
	m := new(dns.Msg)
	m.Rcode = rcode
	if err := ew.WriteMsg(m); err != nil {
		ew.s.log.Debug("dnsd: write error reply", "rcode", rcode, "err", err)
	}
}

// writeTSIGError writes an unsigned NOTAUTH with the TSIG error code
// (RFC 8945 §5.2, §5.3.2).
func (ew *edgeWriter) writeTSIGError(t *dns.TSIG, code int) {
	m := new(dns.Msg)
	m.Rcode = dns.RcodeNotAuth
	ew.finish(m, false)
	rr := &dns.TSIG{
		Hdr:        dns.RR_Header{Name: t.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm:  t.Algorithm,
		TimeSigned: t.TimeSigned,
		Fudge:      t.Fudge,
		OrigId:     ew.req.Id,
		Error:      uint16(code),
	}
	if code == dns.RcodeBadTime {
		rr.OtherLen = 6
		rr.OtherData = fmt.Sprintf("%012x", time.Now().Unix())
	}
	m.Extra = append(m.Extra, rr)
	b, err := m.Pack()
	if err == nil {
		_, err = ew.Write(b)
	}
	if err != nil {
		ew.s.log.Debug("dnsd: write tsig error", "err", err)
	}
}

// finish applies the edge's rules to a reply. sign adds a TSIG for a
// request that carried a valid one.
func (ew *edgeWriter) finish(m *dns.Msg, sign bool) {
	r, info := ew.req, ew.info
	m.Id = r.Id
	m.Response = true
	m.Opcode = r.Opcode
	m.RecursionDesired = r.RecursionDesired
	m.RecursionAvailable = false
	m.Zero = false
	if len(r.Question) == 1 {
		m.Question = append(m.Question[:0], r.Question[0]) // the client's case (0x20)
	} else {
		m.Question = nil
	}

	// Take OPT and TSIG out; keep the options a handler put in its OPT.
	var opts []dns.EDNS0
	var tsig *dns.TSIG
	extra := m.Extra[:0:0]
	for _, rr := range m.Extra {
		switch rr := rr.(type) {
		case *dns.OPT:
			opts = append(opts, rr.Option...)
		case *dns.TSIG:
			tsig = rr
		default:
			extra = append(extra, rr)
		}
	}
	m.Extra = extra

	maxUDP := defaultMaxUDPSize
	if ew.snap != nil {
		maxUDP = ew.snap.maxUDP
	}
	if info.edns {
		m.Extra = append(m.Extra, ew.replyOPT(opts, maxUDP))
	}

	if sign && tsig == nil && info.tsig != nil {
		tsig = &dns.TSIG{
			Hdr:        dns.RR_Header{Name: info.tsig.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
			Algorithm:  info.tsig.Algorithm,
			Fudge:      tsigFudge,
			TimeSigned: uint64(time.Now().Unix()),
			OrigId:     r.Id,
		}
	}

	m.Compress = true
	size := info.replySize(info.tcp, maxUDP)
	if tsig != nil {
		size -= dns.Len(tsig) + 64 // room for the MAC
	}
	if ew.fit(m, size) && !info.tcp {
		ew.s.m.truncated.Inc()
	}
	if tsig != nil {
		m.Extra = append(m.Extra, tsig)
	}
}

// replyOPT is the reply's OPT record: the server's UDP size and the DO
// bit, the options a handler set (opts), then the NSID and the cookie when
// asked for, and a client subnet option of scope 0 when the query had one
// and no handler said what the answer depended on (nothing of the client).
func (ew *edgeWriter) replyOPT(opts []dns.EDNS0, maxUDP int) *dns.OPT {
	info := ew.info
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(uint16(maxUDP))
	if info.do {
		opt.SetDo()
	}
	if info.co && info.compact {
		opt.SetCo() // RFC 9824 §5: this answer comes from a signer that knows CO
	}
	opt.Option = opts
	if info.sendsNSID(ew.snap) {
		opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: ew.snap.nsidHex})
	}
	if info.cookie != nil {
		opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: ew.s.serverCookie(info)})
	}
	if info.hasECS && !hasOption(opts, dns.EDNS0SUBNET) {
		opt.Option = append(opt.Option, ecsOption(info, 0))
	}
	return opt
}
