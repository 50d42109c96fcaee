// Package dnstest writes DNS behaviour as data: a Case is a query and the
// reply expected for it, sections given as zone-file text.
package dnstest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Case is one query and its expected reply.
type Case struct {
	// Name names the subtest.
	Name string
	// Qname, Qtype and Qclass are the question (Qclass 0 means IN).
	Qname  string
	Qtype  uint16
	Qclass uint16
	// TCP sends the query over TCP instead of UDP.
	TCP bool
	// EDNS adds an OPT with UDPSize (0 means 1232), DO and Options.
	EDNS    bool
	UDPSize uint16
	DO      bool
	Options []dns.EDNS0
	// RD, CD and AD set those query flags.
	RD, CD, AD bool

	// Rcode is the expected rcode.
	Rcode int
	// AA and TC are the expected flags.
	AA, TC bool
	// Answer, Ns and Extra are the expected sections as zone-file text
	// (in any order); Extra never lists the OPT record.
	Answer, Ns, Extra []string
	// AnswerCount, when > 0, checks only the number of answer records;
	// when < 0 the answer section is not checked.
	AnswerCount int
	// Check, when set, runs more checks on the reply.
	Check func(t testing.TB, resp *dns.Msg)
}

// Msg returns the query of c.
func (c Case) Msg() *dns.Msg {
	m := new(dns.Msg)
	qclass := c.Qclass
	if qclass == 0 {
		qclass = dns.ClassINET
	}
	m.Id = dns.Id()
	m.Question = []dns.Question{{Name: c.Qname, Qtype: c.Qtype, Qclass: qclass}}
	m.RecursionDesired = c.RD
	m.CheckingDisabled = c.CD
	m.AuthenticatedData = c.AD
	if c.EDNS {
		size := c.UDPSize
		if size == 0 {
			size = 1232
		}
		m.SetEdns0(size, c.DO)
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, c.Options...)
	}
	return m
}

// Exchange sends c's query to addr and returns the reply.
func Exchange(t testing.TB, addr string, c Case) *dns.Msg {
	t.Helper()
	cl := &dns.Client{Net: "udp", Timeout: 5 * time.Second, UDPSize: dns.MaxMsgSize}
	if c.TCP {
		cl.Net = "tcp"
	}
	resp, _, err := cl.Exchange(c.Msg(), addr)
	if err != nil {
		t.Fatalf("exchange %s %s: %v", c.Qname, dns.TypeToString[c.Qtype], err)
	}
	return resp
}

// Assert checks resp against c.
func Assert(t testing.TB, c Case, resp *dns.Msg) {
	t.Helper()
	if resp.Rcode != c.Rcode {
		t.Errorf("rcode = %s, want %s\n%v", dns.RcodeToString[resp.Rcode], dns.RcodeToString[c.Rcode], resp)
	}
	if resp.Authoritative != c.AA {
		t.Errorf("AA = %v, want %v", resp.Authoritative, c.AA)
	}
	if resp.Truncated != c.TC {
		t.Errorf("TC = %v, want %v", resp.Truncated, c.TC)
	}
	if resp.RecursionAvailable {
		t.Errorf("RA set")
	}
	if resp.RecursionDesired != c.RD {
		t.Errorf("RD = %v, want %v (copied)", resp.RecursionDesired, c.RD)
	}
	if len(resp.Question) != 1 || resp.Question[0].Name != c.Qname {
		t.Errorf("question = %v, want %q with the query's case", resp.Question, c.Qname)
	}
	switch {
	case c.AnswerCount < 0:
	case c.AnswerCount > 0:
		if len(resp.Answer) != c.AnswerCount {
			t.Errorf("answer has %d records, want %d", len(resp.Answer), c.AnswerCount)
		}
	default:
		Section(t, "answer", resp.Answer, c.Answer)
	}
	Section(t, "authority", resp.Ns, c.Ns)
	var extra []dns.RR
	for _, rr := range resp.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	Section(t, "additional", extra, c.Extra)
	if c.Check != nil {
		c.Check(t, resp)
	}
}

// Section compares records with the expected zone-file text, ignoring
// order and the case of names.
func Section(t testing.TB, name string, got []dns.RR, want []string) {
	t.Helper()
	g := make([]string, 0, len(got))
	for _, rr := range got {
		g = append(g, norm(rr.String()))
	}
	w := make([]string, 0, len(want))
	for _, s := range want {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("bad expected record %q: %v", s, err)
		}
		w = append(w, norm(rr.String()))
	}
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s section:\n got %q\nwant %q", name, g, w)
	}
}

func norm(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// Run runs every case as a subtest against addr.
func Run(t *testing.T, addr string, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			Assert(t, c, Exchange(t, addr, c))
		})
	}
}
