package dnsd

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/zones"
	"golang.org/x/sync/errgroup"
)

const testZone = `$ORIGIN example.org.
@        3600 IN SOA  ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300
@        3600 IN NS   ns1.example.org.
@        3600 IN NS   ns2.example.org.
@        3600 IN MX   10 mail.example.org.
@        3600 IN A    192.0.2.1
ns1      3600 IN A    192.0.2.53
ns2      3600 IN AAAA 2001:db8::53
mail     3600 IN A    192.0.2.25
static    300 IN A    192.0.2.10
static    300 IN TXT  "hello"
alias     300 IN CNAME static.example.org.
chain1    300 IN CNAME chain2.example.org.
chain2    300 IN CNAME alias.example.org.
loop1     300 IN CNAME loop2.example.org.
loop2     300 IN CNAME loop1.example.org.
out       300 IN CNAME www.example.net.
dangling  300 IN CNAME nothere.example.org.
togroup   300 IN CNAME www.example.org.
a.b.c     300 IN A    192.0.2.30
*.wild    300 IN A    192.0.2.40
*.wild    300 IN TXT  "wild"
exists.wild 300 IN TXT "real"
*.cwild   300 IN CNAME static.example.org.
sub      3600 IN NS   ns.sub.example.org.
sub      3600 IN NS   ns.other.net.
ns.sub   3600 IN A    192.0.2.60
sec      3600 IN NS   ns1.example.org.
sec      3600 IN DS   12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
www       300 IN TXT  "group with a static TXT"
`

func parseZone(t testing.TB, origin, text string) *zones.Zone {
	t.Helper()
	zp := dns.NewZoneParser(strings.NewReader(text), origin, "")
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("zone %s: %v", origin, err)
	}
	return zones.NewZone(origin, rrs)
}

// bigZone has a TXT RRset far larger than 512 bytes at big.example.org.
func bigZoneText() string {
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "big 300 IN TXT \"record number %03d of a large rrset\"\n", i)
	}
	return b.String()
}

// bigGroup answers with 40 addresses, 652 bytes: more than a reply
// without EDNS may carry.
func bigGroup() zones.GroupConfig {
	g := zones.GroupConfig{Name: "many.example.org.", TTL: zones.TTLBounds{Min: 20, Max: 30}, Answers: 40}
	for i := range 40 {
		g.Members = append(g.Members, zones.MemberConfig{Name: fmt.Sprintf("m%d", i),
			Addresses: []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(150 + i)})}})
	}
	return g
}

func testSet(t testing.TB, mut func(*zones.Config)) *zones.Set {
	t.Helper()
	z := parseZone(t, "example.org.", testZone+bigZoneText())
	cfg := &zones.Config{
		Server: zones.ServerConfig{
			Identity:          "dnsd-test",
			Version:           "transmirror-test",
			NSID:              "node1",
			MaxUDPSize:        1232,
			TCPIdleTimeout:    zones.Duration(10 * time.Second),
			MaxTCPConnections: 1000,
			TSIG:              []zones.TSIGKey{{Name: "xfr.key.", Algorithm: "hmac-sha256", Secret: testSecret}},
		},
		Zones: []zones.ZoneConfig{{Origin: "example.org.", AllowTransfer: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}},
		Groups: []zones.GroupConfig{
			{Name: "www.example.org.", TTL: zones.TTLBounds{Min: 20, Max: 60}, Answers: 2, Members: []zones.MemberConfig{
				{Name: "fra1", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.101"), netip.MustParseAddr("2001:db8::101")}},
				{Name: "ams1", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.102")}},
				{Name: "nyc1", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.103"), netip.MustParseAddr("2001:db8::103")}},
			}},
			{Name: "v4only.example.org.", TTL: zones.TTLBounds{Min: 20, Max: 30}, Members: []zones.MemberConfig{
				{Name: "a", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.111")}},
			}},
			bigGroup(),
		},
	}
	if mut != nil {
		mut(cfg)
	}
	set := &zones.Set{Config: cfg, Zones: []*zones.Zone{z}, Groups: map[string]*zones.GroupConfig{}}
	for i := range cfg.Groups {
		set.Groups[dns.CanonicalName(cfg.Groups[i].Name)] = &cfg.Groups[i]
	}
	return set
}

const testSecret = "c2VjcmV0LWtleS1mb3ItdHJhbnNtaXJyb3ItdGVzdHM="

// testServer is a Server under test and its address (UDP and TCP).
type testServer struct {
	*Server
	addr string
	reg  *prometheus.Registry
}

func newTestServer(t testing.TB, set *zones.Set, opts Options) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Registry = reg
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(set); err != nil {
		t.Fatal(err)
	}
	return &testServer{Server: s, addr: serve(t, s), reg: reg}
}

// serve binds UDP and TCP on the same 127.0.0.1 port and serves s on them
// until the test ends.
func serve(t testing.TB, s *Server) string {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	for i := 0; ; i++ {
		var err error
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		if i == 20 {
			t.Fatalf("no port free for both udp and tcp: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return s.ServeUDP(ctx, pc) })
	g.Go(func() error { return s.ServeTCP(ctx, ln) })
	t.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return pc.LocalAddr().String()
}

// rawExchange sends b over UDP and returns the reply, or nil when none
// came within wait.
func rawExchange(t testing.TB, addr string, b []byte, wait time.Duration) *dns.Msg {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf[:n]); err != nil {
		t.Fatalf("unpack reply: %v", err)
	}
	return m
}

func mustPack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// handlerFunc adapts a function to a Handler named "func", for tests that
// wrap the chain.
type handlerFunc func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error)

// ServeDNS calls f.
func (f handlerFunc) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	return f(ctx, w, r)
}

// Name returns "func".
func (f handlerFunc) Name() string { return "func" }

var _ Handler = handlerFunc(nil)
