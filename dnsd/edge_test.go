package dnsd

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/transmirror/transmirror/dnsd/internal/dnstest"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/zones"
)

// cleanFlags checks that an error reply copies only ID, opcode and RD.
func cleanFlags(t testing.TB, q, r *dns.Msg) {
	t.Helper()
	if r.Id != q.Id || r.Opcode != q.Opcode || r.RecursionDesired != q.RecursionDesired {
		t.Errorf("id/opcode/rd not copied: %v", r)
	}
	if !r.Response || r.Authoritative || r.Truncated || r.RecursionAvailable || r.AuthenticatedData || r.CheckingDisabled || r.Zero {
		t.Errorf("flags not clean: %v", r.MsgHdr)
	}
}

func TestEdge(t *testing.T) {
	ts := newTestServer(t, testSet(t, nil), Options{})
	q := func(name string, qtype uint16) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		return m
	}
	t.Run("opcode NOTIFY and UPDATE are NOTIMP with clean flags", func(t *testing.T) {
		for _, op := range []int{dns.OpcodeNotify, dns.OpcodeUpdate, dns.OpcodeStatus} {
			m := q("example.org.", dns.TypeSOA)
			m.Opcode = op
			m.Truncated, m.AuthenticatedData, m.CheckingDisabled, m.RecursionDesired, m.Authoritative = true, true, true, true, true
			r := rawExchange(t, ts.addr, mustPack(t, m), 5*time.Second)
			if r == nil || r.Rcode != dns.RcodeNotImplemented {
				t.Fatalf("opcode %d: reply %v, want NOTIMP", op, r)
			}
			cleanFlags(t, m, r)
		}
	})
	t.Run("QDCOUNT 0 and 2 are FORMERR", func(t *testing.T) {
		m := q("example.org.", dns.TypeSOA)
		m.CheckingDisabled = true
		m.Question = append(m.Question, m.Question[0])
		for _, qs := range [][]dns.Question{nil, m.Question} {
			m.Question = qs
			r := rawExchange(t, ts.addr, mustPack(t, m), 5*time.Second)
			if r == nil || r.Rcode != dns.RcodeFormatError {
				t.Fatalf("qdcount %d: reply %v, want FORMERR", len(qs), r)
			}
			cleanFlags(t, m, r)
		}
	})
	t.Run("two OPT records are FORMERR", func(t *testing.T) {
		m := q("static.example.org.", dns.TypeA)
		m.SetEdns0(1232, false)
		m.Extra = append(m.Extra, m.Extra[0])
		r := rawExchange(t, ts.addr, mustPack(t, m), 5*time.Second)
		if r == nil || r.Rcode != dns.RcodeFormatError {
			t.Fatalf("reply %v, want FORMERR", r)
		}
		cleanFlags(t, m, r)
	})
	t.Run("EDNS version 1 is BADVERS", func(t *testing.T) {
		m := q("static.example.org.", dns.TypeA)
		m.SetEdns0(1232, false)
		m.IsEdns0().SetVersion(1)
		r := rawExchange(t, ts.addr, mustPack(t, m), 5*time.Second)
		if r == nil || r.Rcode != dns.RcodeBadVers {
			t.Fatalf("reply %v, want BADVERS", r)
		}
		if opt := r.IsEdns0(); opt == nil || opt.Version() != 0 {
			t.Errorf("BADVERS reply OPT = %v, want version 0", opt)
		}
		if len(r.Answer) != 0 {
			t.Errorf("BADVERS with answers")
		}
	})
	t.Run("QR set gets no reply", func(t *testing.T) {
		m := q("static.example.org.", dns.TypeA)
		m.Response = true
		if r := rawExchange(t, ts.addr, mustPack(t, m), 300*time.Millisecond); r != nil {
			t.Fatalf("reply to a response: %v", r)
		}
	})
	t.Run("unparseable is dropped", func(t *testing.T) {
		b := mustPack(t, q("static.example.org.", dns.TypeA))
		before := testutil.ToFloat64(ts.m.dropped)
		loop := append(b[:12:12], 0xc0, 0x0c, 0, 1, 0, 1) // name pointing at itself
		for _, raw := range [][]byte{b[:5], loop, append(b[:12:12], 0xff, 0xff, 0xff)} {
			if r := rawExchange(t, ts.addr, raw, 300*time.Millisecond); r != nil {
				t.Fatalf("reply to garbage %x: %v", raw, r)
			}
		}
		probetest.Until(t, 5*time.Second, func() string {
			if n := testutil.ToFloat64(ts.m.dropped) - before; n < 3 {
				return fmt.Sprintf("dropped counted: %g more, want 3", n)
			}
			return ""
		})
	})
	for _, qt := range []uint16{dns.TypeOPT, dns.TypeNXNAME} { // NXNAME: RFC 9824 §3.5
		t.Run("QTYPE "+dns.TypeToString[qt]+" is FORMERR", func(t *testing.T) {
			m := q("static.example.org.", qt)
			r := rawExchange(t, ts.addr, mustPack(t, m), 5*time.Second)
			if r == nil || r.Rcode != dns.RcodeFormatError {
				t.Fatalf("reply %v, want FORMERR", r)
			}
		})
	}
	t.Run("bad cookie length is FORMERR", func(t *testing.T) {
		m := q("static.example.org.", dns.TypeA)
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405"}}
		r := rawExchange(t, ts.addr, mustPack(t, m), 5*time.Second)
		if r == nil || r.Rcode != dns.RcodeFormatError {
			t.Fatalf("reply %v, want FORMERR", r)
		}
	})

	optCheck := func(t testing.TB, r *dns.Msg) *dns.OPT {
		opt := r.IsEdns0()
		if opt == nil {
			t.Fatal("no OPT echoed")
		}
		if opt.UDPSize() != 1232 || opt.Version() != 0 {
			t.Errorf("OPT size %d version %d, want 1232 and 0", opt.UDPSize(), opt.Version())
		}
		return opt
	}
	dnstest.Run(t, ts.addr, []dnstest.Case{
		{Name: "OPT echoed with our size, DO copied, unknown option ignored", Qname: "static.example.org.", Qtype: dns.TypeA, AA: true,
			EDNS: true, UDPSize: 4096, DO: true, Options: []dns.EDNS0{&dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1, 2}}},
			Answer: []string{"static.example.org. 300 IN A 192.0.2.10"},
			Check: func(t testing.TB, r *dns.Msg) {
				if opt := optCheck(t, r); !opt.Do() || len(opt.Option) != 0 {
					t.Errorf("OPT = %v, want DO and no options", opt)
				}
			}},
		{Name: "NSID", Qname: "static.example.org.", Qtype: dns.TypeA, AA: true, EDNS: true,
			Options: []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}},
			Answer:  []string{"static.example.org. 300 IN A 192.0.2.10"},
			Check: func(t testing.TB, r *dns.Msg) {
				for _, o := range optCheck(t, r).Option {
					if n, ok := o.(*dns.EDNS0_NSID); ok && n.Nsid == hex.EncodeToString([]byte("node1")) {
						return
					}
				}
				t.Error("no NSID node1 in reply")
			}},
		{Name: "cookie echoed with server cookie", Qname: "static.example.org.", Qtype: dns.TypeA, AA: true, EDNS: true,
			Options: []dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}},
			Answer:  []string{"static.example.org. 300 IN A 192.0.2.10"},
			Check: func(t testing.TB, r *dns.Msg) {
				for _, o := range optCheck(t, r).Option {
					if c, ok := o.(*dns.EDNS0_COOKIE); ok && strings.HasPrefix(c.Cookie, "0102030405060708") && len(c.Cookie) == 32 {
						return
					}
				}
				t.Error("no client+server cookie in reply")
			}},
		{Name: "truncated at 512 without EDNS", Qname: "big.example.org.", Qtype: dns.TypeTXT, AA: true, TC: true,
			Check: func(t testing.TB, r *dns.Msg) {
				r.Compress = true
				if r.Len() > 512 || len(r.Answer) == 0 || len(r.Answer) >= 60 {
					t.Errorf("reply of %d bytes with %d answers", r.Len(), len(r.Answer))
				}
			}, AnswerCount: -1},
		{Name: "truncated at server max with big EDNS", Qname: "big.example.org.", Qtype: dns.TypeTXT, AA: true, TC: true,
			EDNS: true, UDPSize: 4096, AnswerCount: -1,
			Check: func(t testing.TB, r *dns.Msg) {
				r.Compress = true
				if r.Len() > 1232 || r.Len() <= 512 {
					t.Errorf("reply of %d bytes, want 512 < n <= 1232", r.Len())
				}
			}},
		{Name: "full over TCP", Qname: "big.example.org.", Qtype: dns.TypeTXT, AA: true, TCP: true, AnswerCount: 60},
		{Name: "CH id.server", Qname: "id.server.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS, AA: true,
			Answer: []string{`id.server. 0 CH TXT "dnsd-test"`}},
		{Name: "CH hostname.bind", Qname: "hostname.bind.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS, AA: true,
			Answer: []string{`hostname.bind. 0 CH TXT "dnsd-test"`}},
		{Name: "CH version.bind", Qname: "version.bind.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS, AA: true,
			Answer: []string{`version.bind. 0 CH TXT "transmirror-test"`}},
		{Name: "CH version.server", Qname: "version.server.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS, AA: true,
			Answer: []string{`version.server. 0 CH TXT "transmirror-test"`}},
		{Name: "CH other REFUSED", Qname: "authors.bind.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS, Rcode: dns.RcodeRefused},
		{Name: "CH A REFUSED", Qname: "version.bind.", Qtype: dns.TypeA, Qclass: dns.ClassCHAOS, Rcode: dns.RcodeRefused},
		{Name: "REFUSED has clean flags and OPT", Qname: "example.com.", Qtype: dns.TypeA, RD: true, CD: true, AD: true, EDNS: true,
			Rcode: dns.RcodeRefused, Check: func(t testing.TB, r *dns.Msg) {
				optCheck(t, r)
				if r.CheckingDisabled || r.AuthenticatedData {
					t.Errorf("flags not clean: %v", r.MsgHdr)
				}
			}},
	})
}

func TestTruncateDropsAdditionalFirst(t *testing.T) {
	// An answer that fits in 512 bytes only without its additional
	// records: they go, TC stays clear.
	var b strings.Builder
	b.WriteString(testZone)
	for i := range 12 {
		fmt.Fprintf(&b, "@ 3600 IN NS nameserver-%02d.example.org.\n", i)
		fmt.Fprintf(&b, "nameserver-%02d 3600 IN AAAA 2001:db8::%d\n", i, i+100)
	}
	set := testSet(t, nil)
	set.Zones = []*zones.Zone{parseZone(t, "example.org.", b.String())}
	ts := newTestServer(t, set, Options{})
	r := dnstest.Exchange(t, ts.addr, dnstest.Case{Qname: "example.org.", Qtype: dns.TypeNS})
	if r.Truncated || len(r.Answer) != 14 || len(r.Extra) >= 14 {
		t.Errorf("TC=%v answers=%d extra=%d, want no TC, 14 answers, fewer additionals", r.Truncated, len(r.Answer), len(r.Extra))
	}
}

func TestCHDisabled(t *testing.T) {
	ts := newTestServer(t, testSet(t, func(c *zones.Config) { c.Server.Identity, c.Server.Version = "", "" }), Options{})
	dnstest.Run(t, ts.addr, []dnstest.Case{
		{Name: "id.server", Qname: "id.server.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS, Rcode: dns.RcodeRefused},
		{Name: "version.bind", Qname: "version.bind.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS, Rcode: dns.RcodeRefused},
	})
}

func TestTSIG(t *testing.T) {
	ts := newTestServer(t, testSet(t, nil), Options{})
	signed := func(key, secret string) []byte {
		m := new(dns.Msg)
		m.SetQuestion("static.example.org.", dns.TypeA)
		m.SetTsig(key, dns.HmacSHA256, 300, time.Now().Unix())
		b, _, err := dns.TsigGenerate(m, secret, "", false)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tsigErr := func(t *testing.T, r *dns.Msg, want uint16) {
		t.Helper()
		if r == nil || r.Rcode != dns.RcodeNotAuth || len(r.Answer) != 0 {
			t.Fatalf("reply %v, want NOTAUTH without answers", r)
		}
		tr := r.IsTsig()
		if tr == nil || tr.Error != want || tr.MAC != "" {
			t.Fatalf("TSIG %v, want error %d and no MAC", tr, want)
		}
	}
	t.Run("unknown key is BADKEY", func(t *testing.T) {
		tsigErr(t, rawExchange(t, ts.addr, signed("other.key.", testSecret), 5*time.Second), dns.RcodeBadKey)
	})
	t.Run("bad MAC is BADSIG", func(t *testing.T) {
		tsigErr(t, rawExchange(t, ts.addr, signed("xfr.key.", "d3Jvbmctc2VjcmV0"), 5*time.Second), dns.RcodeBadSig)
	})
	t.Run("good signature gets a signed answer", func(t *testing.T) {
		c := &dns.Client{Net: "tcp", TsigSecret: map[string]string{"xfr.key.": testSecret}, Timeout: 5 * time.Second}
		m := new(dns.Msg)
		m.SetQuestion("static.example.org.", dns.TypeA)
		m.SetTsig("xfr.key.", dns.HmacSHA256, 300, time.Now().Unix())
		r, _, err := c.Exchange(m, ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.IsTsig() == nil {
			t.Fatalf("reply %v, want a signed answer", r)
		}
	})
}

func TestTCP(t *testing.T) {
	set := testSet(t, func(c *zones.Config) {
		c.Server.TCPIdleTimeout = zones.Duration(300 * time.Millisecond)
		c.Server.MaxTCPConnections = 2
	})
	ts := newTestServer(t, set, Options{})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	query := func(name string) []byte {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		b := mustPack(t, m)
		return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)
	}
	read := func(c net.Conn) (*dns.Msg, error) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return nil, err
		}
		b := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, b); err != nil {
			return nil, err
		}
		m := new(dns.Msg)
		return m, m.Unpack(b)
	}
	c1 := dial()
	t.Run("pipelined", func(t *testing.T) {
		names := []string{"static.example.org.", "mail.example.org.", "ns1.example.org."}
		var buf []byte
		for _, n := range names {
			buf = append(buf, query(n)...)
		}
		if _, err := c1.Write(buf); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for range names {
			m, err := read(c1)
			if err != nil {
				t.Fatal(err)
			}
			if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
				t.Fatalf("reply %v", m)
			}
			got[m.Question[0].Name] = true
		}
		if len(got) != 3 {
			t.Errorf("answers for %v, want 3 names", got)
		}
	})
	t.Run("connection cap", func(t *testing.T) {
		c2 := dial()
		if _, err := c2.Write(query("static.example.org.")); err != nil {
			t.Fatal(err)
		}
		if _, err := read(c2); err != nil {
			t.Fatal(err)
		}
		c3 := dial()
		c3.Write(query("static.example.org."))
		if m, err := read(c3); err == nil {
			t.Fatalf("third connection answered: %v", m)
		}
		probetest.Until(t, 5*time.Second, func() string {
			if n := testutil.ToFloat64(ts.m.tcpRejected); n < 1 {
				return fmt.Sprintf("rejection counted: %g", n)
			}
			return ""
		})
	})
	t.Run("idle timeout closes", func(t *testing.T) {
		if _, err := read(c1); err == nil {
			t.Fatal("idle connection not closed")
		}
		// The slot is free again.
		probetest.Until(t, 5*time.Second, func() string {
			if n := ts.tcpConns.Load(); n >= 2 {
				return fmt.Sprintf("slot freed: %d connections", n)
			}
			return ""
		})
	})
}

func TestAXFR(t *testing.T) {
	ts := newTestServer(t, testSet(t, nil), Options{})
	axfr := func(t *testing.T, addr string, tsig bool) ([]dns.RR, error) {
		tr := &dns.Transfer{}
		m := new(dns.Msg)
		m.SetAxfr("example.org.")
		if tsig {
			tr.TsigSecret = map[string]string{"xfr.key.": testSecret}
			m.SetTsig("xfr.key.", dns.HmacSHA256, 300, time.Now().Unix())
		}
		ch, err := tr.In(m, addr)
		if err != nil {
			return nil, err
		}
		var rrs []dns.RR
		for env := range ch {
			if env.Error != nil {
				return rrs, env.Error
			}
			rrs = append(rrs, env.RR...)
		}
		return rrs, nil
	}
	want := len(testSet(t, nil).Zones[0].Records()) + 1
	for _, tsig := range []bool{false, true} {
		rrs, err := axfr(t, ts.addr, tsig)
		if err != nil {
			t.Fatalf("axfr tsig=%v: %v", tsig, err)
		}
		if len(rrs) != want || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
			t.Errorf("axfr tsig=%v: %d records, want %d framed by SOA", tsig, len(rrs), want)
		}
	}
	dnstest.Run(t, ts.addr, []dnstest.Case{
		{Name: "AXFR over UDP REFUSED", Qname: "example.org.", Qtype: dns.TypeAXFR, Rcode: dns.RcodeRefused},
		{Name: "IXFR over UDP is the SOA", Qname: "example.org.", Qtype: dns.TypeIXFR, AA: true,
			Answer: []string{"example.org. 3600 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300"}},
		{Name: "AXFR of non-apex REFUSED", Qname: "static.example.org.", Qtype: dns.TypeAXFR, TCP: true, Rcode: dns.RcodeRefused},
	})

	denied := newTestServer(t, testSet(t, func(c *zones.Config) {
		c.Zones[0].AllowTransfer = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	}), Options{})
	dnstest.Run(t, denied.addr, []dnstest.Case{
		{Name: "AXFR from unlisted client REFUSED", Qname: "example.org.", Qtype: dns.TypeAXFR, TCP: true, Rcode: dns.RcodeRefused},
	})
}

func TestPanicIsServfail(t *testing.T) {
	wrap := func(next Handler) Handler {
		return handlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
			if r.Question[0].Name == "panic.example.org." {
				panic("boom")
			}
			return next.ServeDNS(ctx, w, r)
		})
	}
	ts := newTestServer(t, testSet(t, nil), Options{wrap: wrap})
	dnstest.Run(t, ts.addr, []dnstest.Case{
		{Name: "panic", Qname: "panic.example.org.", Qtype: dns.TypeA, RD: true, Rcode: dns.RcodeServerFailure},
		{Name: "still serving", Qname: "static.example.org.", Qtype: dns.TypeA, AA: true, Answer: []string{"static.example.org. 300 IN A 192.0.2.10"}},
	})
	if got := testutil.ToFloat64(ts.m.panics); got != 1 {
		t.Errorf("panics_total = %v, want 1", got)
	}
}

func TestReloadUnderLoad(t *testing.T) {
	// The TCP clients open a connection per query, thousands a second from
	// one address: a server that lags in closing them (-race, a busy
	// machine) would refuse some for max_tcp_connections_per_client, which
	// has its own test. Here the cap is out of the way.
	roomy := func(c *zones.Config) { c.Server.MaxTCPConnectionsPerClient = c.Server.MaxTCPConnections }
	set := testSet(t, roomy)
	ts := newTestServer(t, set, Options{})
	var failures atomic.Int64
	var queries atomic.Int64
	var firstMu sync.Mutex
	var first string // the first failure, for the report
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: []string{"udp", "tcp"}[i%2], Timeout: 5 * time.Second}
			m := new(dns.Msg)
			m.SetQuestion("static.example.org.", dns.TypeA)
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, _, err := c.Exchange(m, ts.addr)
				if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
					failures.Add(1)
					firstMu.Lock()
					if first == "" {
						first = fmt.Sprintf("over %s: err %v, reply %v", c.Net, err, r)
					}
					firstMu.Unlock()
				}
				queries.Add(1)
			}
		}()
	}
	for range 50 {
		if err := ts.Load(testSet(t, roomy)); err != nil {
			t.Fatal(err)
		}
	}
	probetest.Until(t, 5*time.Second, func() string {
		if n := queries.Load(); n < 50 {
			return fmt.Sprintf("some queries: %d, want 50", n)
		}
		return ""
	})
	close(stop)
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Errorf("%d of %d queries failed during reloads; the first %s", f, queries.Load(), first)
	}
	if err := ts.Load(nil); err == nil {
		t.Error("Load(nil) succeeded")
	}
	if ts.snap.Load() == nil {
		t.Error("bad Load dropped the snapshot")
	}
}

func TestLoadErrors(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad := testSet(t, func(c *zones.Config) {
		c.Server.TSIG = []zones.TSIGKey{{Name: "a.", Algorithm: "md5", Secret: testSecret}, {Name: "b.", Secret: "!!"}}
	})
	err = s.Load(bad)
	if err == nil || !strings.Contains(err.Error(), `"a."`) || !strings.Contains(err.Error(), `"b."`) {
		t.Errorf("Load = %v, want errors for both keys", err)
	}
	if s.snap.Load() != nil {
		t.Error("bad set was loaded")
	}
}

func TestMetricsLint(t *testing.T) {
	ts := newTestServer(t, testSet(t, nil), Options{})
	dnstest.Exchange(t, ts.addr, dnstest.Case{Qname: "static.example.org.", Qtype: dns.TypeA})
	dnstest.Exchange(t, ts.addr, dnstest.Case{Qname: "big.example.org.", Qtype: dns.TypeTXT})
	probetest.Until(t, 5*time.Second, func() string {
		if n := testutil.ToFloat64(ts.m.queries.WithLabelValues("udp", "A", "NOERROR")); n != 1 {
			return fmt.Sprintf("query counted: %g, want 1", n)
		}
		return ""
	})
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) < 6 {
		t.Fatalf("gathered %d metric families, want at least 6", len(mfs))
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if got := testutil.ToFloat64(ts.m.truncated); got != 1 {
		t.Errorf("truncated_total = %v, want 1", got)
	}
}

// TestTCPClient: the per-client TCP cap counts an IPv4 address on its
// own and an IPv6 address for its /64.
func TestTCPClient(t *testing.T) {
	cases := []struct{ name, ip, want string }{
		{"IPv4", "192.0.2.7", "192.0.2.7"},
		{"IPv6: its /64", "2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::"},
		{"another address of the same /64", "2001:db8:1:2::1", "2001:db8:1:2::"},
		{"the next /64", "2001:db8:1:3::1", "2001:db8:1:3::"},
		{"a zone is not part of it", "fe80::1%eth0", "fe80::"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tcpClient(netip.MustParseAddr(tc.ip)); got != netip.MustParseAddr(tc.want) {
				t.Errorf("tcpClient(%s) = %s, want %s", tc.ip, got, tc.want)
			}
		})
	}
}

// TestTCPClientLimits: one client address gets at most
// max_tcp_connections_per_client connections (another address still gets
// in), and a connection is closed after max_tcp_queries queries.
func TestTCPClientLimits(t *testing.T) {
	ts := newTestServer(t, testSet(t, func(c *zones.Config) {
		c.Server.MaxTCPConnectionsPerClient = 2
		c.Server.MaxTCPQueries = 3
	}), Options{})
	dialFrom := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ask := func(c net.Conn) error {
		q := new(dns.Msg)
		q.SetQuestion("static.example.org.", dns.TypeA)
		b := mustPack(t, q)
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return err
		}
		_, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint16(l[:])))
		return err
	}
	t.Run("per client", func(t *testing.T) {
		a1, a2 := dialFrom("127.0.0.1"), dialFrom("127.0.0.1")
		for _, c := range []net.Conn{a1, a2} {
			if err := ask(c); err != nil {
				t.Fatalf("connection within the cap: %v", err)
			}
		}
		before := testutil.ToFloat64(ts.m.tcpRejected)
		if err := ask(dialFrom("127.0.0.1")); err == nil {
			t.Error("third connection of 127.0.0.1 answered; the cap is 2")
		}
		probetest.Until(t, 5*time.Second, func() string {
			if n := testutil.ToFloat64(ts.m.tcpRejected); n <= before {
				return fmt.Sprintf("rejection counted: still %g", n)
			}
			return ""
		})
		if err := ask(dialFrom("127.0.1.1")); err != nil {
			t.Errorf("another client address refused: %v", err)
		}
		a1.Close()
		probetest.Until(t, 5*time.Second, func() string {
			c := dialFrom("127.0.0.1")
			defer c.Close()
			if err := ask(c); err != nil {
				return "slot of 127.0.0.1 freed: " + err.Error()
			}
			return ""
		})
	})
	t.Run("queries per connection", func(t *testing.T) {
		c := dialFrom("127.0.2.1")
		for i := range 3 {
			if err := ask(c); err != nil {
				t.Fatalf("query %d of 3: %v", i+1, err)
			}
		}
		if err := ask(c); err == nil {
			t.Error("a fourth query answered; max_tcp_queries is 3")
		}
	})
}
