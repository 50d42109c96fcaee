package dnsd

import (
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/dnsd/internal/dnstest"
	"github.com/transmirror/transmirror/zones"
)

// fakeChallenges is a Challenges whose live values a test sets.
type fakeChallenges struct {
	mu sync.Mutex
	m  map[string][]string // canonical challenge name → values
}

func (f *fakeChallenges) TXT(qname string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[dns.CanonicalName(qname)]
}

func (f *fakeChallenges) set(name string, values ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[name] = values
}

// challengeZone adds a static challenge TXT record (an operator's own,
// for a name no member publishes for), one at a name with a CNAME, and a
// name below the delegation at sub.
const challengeZone = `
_acme-challenge.static 300 IN TXT "static-value"
_acme-challenge.mail   300 IN CNAME mail.acme.example.net.
`

func challengeSet(t testing.TB) *zones.Set {
	set := testSet(t, nil)
	set.Zones = []*zones.Zone{parseZone(t, "example.org.", testZone+challengeZone)}
	return set
}

func TestChallengeAnswers(t *testing.T) {
	ch := &fakeChallenges{m: map[string][]string{}}
	ts := newTestServer(t, challengeSet(t), Options{Challenges: ch})
	ch.set("_acme-challenge.www.example.org.", "value-one", "value-two")
	ch.set("_acme-challenge.static.example.org.", "live-value")
	ch.set("_acme-challenge.mail.example.org.", "live-mail")
	ch.set("_acme-challenge.ns.sub.example.org.", "below-the-cut")
	dnstest.Run(t, ts.addr, []dnstest.Case{
		{Name: "group name TXT", Qname: "_acme-challenge.www.example.org.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
			`_acme-challenge.www.example.org. 10 IN TXT "value-one"`, `_acme-challenge.www.example.org. 10 IN TXT "value-two"`}},
		{Name: "any case", Qname: "_ACME-challenge.WWW.example.org.", Qtype: dns.TypeTXT, AA: true, AnswerCount: 2},
		{Name: "TCP", Qname: "_acme-challenge.www.example.org.", Qtype: dns.TypeTXT, TCP: true, AA: true, AnswerCount: 2},
		{Name: "EDNS", Qname: "_acme-challenge.www.example.org.", Qtype: dns.TypeTXT, EDNS: true, AA: true, AnswerCount: 2},
		{Name: "other type: NODATA", Qname: "_acme-challenge.www.example.org.", Qtype: dns.TypeA, AA: true, Ns: []string{soaNeg}},
		{Name: "ANY", Qname: "_acme-challenge.www.example.org.", Qtype: dns.TypeANY, AA: true, AnswerCount: 2},
		{Name: "live values over a static TXT", Qname: "_acme-challenge.static.example.org.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
			`_acme-challenge.static.example.org. 10 IN TXT "live-value"`}},
		{Name: "static name, other type goes to the zone", Qname: "_acme-challenge.mail.example.org.", Qtype: dns.TypeCNAME, AA: true, Answer: []string{
			`_acme-challenge.mail.example.org. 300 IN CNAME mail.acme.example.net.`}},
		{Name: "below a delegation: the referral", Qname: "_acme-challenge.ns.sub.example.org.", Qtype: dns.TypeTXT, AnswerCount: -1,
			Ns: []string{"sub.example.org. 3600 IN NS ns.sub.example.org.", "sub.example.org. 3600 IN NS ns.other.net."}, Extra: []string{"ns.sub.example.org. 3600 IN A 192.0.2.60"}},
		{Name: "no live value: NXDOMAIN", Qname: "_acme-challenge.nyc.example.org.", Qtype: dns.TypeTXT, AA: true, Rcode: dns.RcodeNameError, Ns: []string{soaNeg}},
		{Name: "outside the zones: REFUSED", Qname: "_acme-challenge.www.example.net.", Qtype: dns.TypeTXT, Rcode: dns.RcodeRefused, AnswerCount: -1},
		{Name: "CH class goes on", Qname: "_acme-challenge.www.example.org.", Qtype: dns.TypeTXT, Qclass: dns.ClassCHAOS, Rcode: dns.RcodeRefused, AnswerCount: -1},
	})
	ch.set("_acme-challenge.static.example.org.")
	ch.set("_acme-challenge.www.example.org.")
	dnstest.Run(t, ts.addr, []dnstest.Case{
		{Name: "removed: the zone's static TXT again", Qname: "_acme-challenge.static.example.org.", Qtype: dns.TypeTXT, AA: true, Answer: []string{
			`_acme-challenge.static.example.org. 300 IN TXT "static-value"`}},
		{Name: "removed: NXDOMAIN", Qname: "_acme-challenge.www.example.org.", Qtype: dns.TypeTXT, AA: true, Rcode: dns.RcodeNameError, Ns: []string{soaNeg}},
	})
}

// TestChallengeNotFast: a static TXT at a challenge name is not in the
// fast table, so that a live value published after the snapshot was
// built is answered at once, over UDP as over TCP.
func TestChallengeNotFast(t *testing.T) {
	ch := &fakeChallenges{m: map[string][]string{}}
	s, err := New(Options{Challenges: ch})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(challengeSet(t)); err != nil {
		t.Fatal(err)
	}
	pkt := query("_acme-challenge.static.example.org.", dns.TypeTXT)
	if _, fast := answerUDP(s, pkt); fast {
		t.Fatal("the fast path answered a challenge name")
	}
	if _, fast := answerUDP(s, query("static.example.org.", dns.TypeTXT)); !fast {
		t.Fatal("the fast path is off: this test proves nothing")
	}
	ch.set("_acme-challenge.static.example.org.", "published-later")
	b, _ := answerUDP(s, pkt)
	m := unpacked(b)
	if m == nil || len(m.Answer) != 1 || m.Answer[0].(*dns.TXT).Txt[0] != "published-later" {
		t.Fatalf("reply after a publish: %v", m)
	}
}
