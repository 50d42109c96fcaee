package dispatch

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

const dispatchZone = `$ORIGIN example.org.
$TTL 300
@    IN SOA ns1 hostmaster 1 3600 600 604800 60
     IN NS  ns1
ns1  IN A   192.0.2.53
`

// dispatchConfig is three regions with two members each, located by the
// committed test mmdb (EU 198.51.100.0/25, NA 203.0.113.0/25, AS
// 192.0.2.0/25) and a static network that wins over it.
const dispatchConfig = `
listen: ["127.0.0.1:0"]
zones:
  - origin: example.org.
    file: example.org.zone
geo:
  mmdb: MMDB
  networks:
    - prefix: 203.0.113.0/24
      location: {lat: 1.35, lon: 103.82, country: SG, continent: AS}
  default: {lat: 40.71, lon: -74.01, country: US, continent: NA}
groups:
  - name: www.example.org.
    ttl: {min: 20, max: 300}
    answers: 1
    policy: {name: POLICY}
    members:
      - {name: fra1, host: fra1.example.org., addresses: [10.0.1.1, "fd00:1::1"], capacity: CAP, bandwidth: BW, location: {lat: 50.11, lon: 8.68, country: DE, continent: EU}}
      - {name: ams1, host: ams1.example.org., addresses: [10.0.1.2], capacity: CAP, bandwidth: BW, location: {lat: 52.37, lon: 4.90, country: NL, continent: EU}}
      - {name: nyc1, host: nyc1.example.org., addresses: [10.0.2.1, "fd00:2::1"], capacity: CAP, bandwidth: BW, location: {lat: 40.71, lon: -74.01, country: US, continent: NA}}
      - {name: sfo1, host: sfo1.example.org., addresses: [10.0.2.2], capacity: CAP, bandwidth: BW, location: {lat: 37.77, lon: -122.42, country: US, continent: NA}}
      - {name: sin1, host: sin1.example.org., addresses: [10.0.3.1], capacity: CAP, bandwidth: BW, location: {lat: 1.35, lon: 103.82, country: SG, continent: AS}}
      - {name: tyo1, host: tyo1.example.org., addresses: [10.0.3.2], capacity: CAP, bandwidth: BW, location: {lat: 35.68, lon: 139.69, country: JP, continent: AS}}
`

// dispatchSet builds the test config with every member's capacity = capacity.
func dispatchSet(t testing.TB, policy string) *zones.Set { return dispatchSetCap(t, policy, "100000") }

func dispatchSetCap(t testing.TB, policy, capacity string) *zones.Set {
	t.Helper()
	return dispatchSetBandwidth(t, policy, capacity, "0")
}

// dispatchSetBandwidth builds the test config with every member's
// capacity and bandwidth as given.
func dispatchSetBandwidth(t testing.TB, policy, capacity, bandwidth string) *zones.Set {
	t.Helper()
	return loadDispatchConfig(t, strings.NewReplacer("POLICY", policy, "CAP", capacity, "BW", bandwidth).Replace(dispatchConfig))
}

// loadDispatchConfig loads the config text, with the test GeoIP
// database's path for MMDB, beside the test zone file.
func loadDispatchConfig(t testing.TB, text string) *zones.Set {
	t.Helper()
	dir := t.TempDir()
	mmdb, err := filepath.Abs(filepath.Join("..", "..", "scheduler", "geo", "testdata", "regions.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), []byte(dispatchZone), 0o644); err != nil {
		t.Fatal(err)
	}
	text = strings.ReplaceAll(text, "MMDB", mmdb)
	cfgPath := filepath.Join(dir, "dnsd.yaml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func newTestDispatcher(t testing.TB, policy string, now func() time.Time) (*Dispatcher, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := New(Options{Registry: reg, Now: now, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Load(dispatchSet(t, policy)); err != nil {
		t.Fatal(err)
	}
	return d, reg
}

var (
	resolver = netip.MustParseAddr("127.0.0.1")
	regionOf = map[string]string{
		"10.0.1.1": "EU", "10.0.1.2": "EU", "10.0.2.1": "NA", "10.0.2.2": "NA", "10.0.3.1": "AS", "10.0.3.2": "AS",
		"fd00:1::1": "EU", "fd00:2::1": "NA",
	}
)

func TestDispatcherRegions(t *testing.T) {
	fixed := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	d, _ := newTestDispatcher(t, "geo-load", func() time.Time { return fixed })
	cases := []struct {
		name       string
		ecs        string
		qtype      uint16
		wantRegion string
		wantScope  int
	}{
		{"EU subnet", "198.51.100.0/24", dns.TypeA, "EU", 24},
		{"AS subnet", "192.0.2.0/24", dns.TypeA, "AS", 24},
		{"EU /32 truncated to /24", "198.51.100.7/32", dns.TypeA, "EU", 24},
		{"static table wins over the mmdb (US there)", "203.0.113.0/24", dns.TypeA, "AS", 24},
		{"EU over IPv6", "2001:db8:1::/48", dns.TypeAAAA, "EU", 48},
		{"NA over IPv6", "2001:db8:2::/48", dns.TypeAAAA, "NA", 48},
		{"no ECS: the resolver's address, default NA, no option", "", dns.TypeA, "NA", -1},
		{"ECS opt-out: scope 0", "0.0.0.0/0", dns.TypeA, "NA", 0},
		{"private ECS not trusted: its own length", "10.9.8.0/24", dns.TypeA, "NA", 24},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ecs netip.Prefix
			if tc.ecs != "" {
				ecs = netip.MustParsePrefix(tc.ecs)
			}
			for range 50 {
				ans, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: tc.qtype, Client: resolver, ECS: ecs})
				if err != nil {
					t.Fatal(err)
				}
				if len(ans.Addrs) != 1 {
					t.Fatalf("answer %v, want one address", ans.Addrs)
				}
				if got := regionOf[ans.Addrs[0].String()]; got != tc.wantRegion {
					t.Fatalf("answer %v is in %s, want %s", ans.Addrs, got, tc.wantRegion)
				}
				// The scope is at least what the decision needed and never
				// more specific than the privacy limit (/24, /56).
				if tc.wantScope <= 0 && ans.ScopePrefix != tc.wantScope ||
					tc.wantScope > 0 && (ans.ScopePrefix < tc.wantScope || ans.ScopePrefix > 56) {
					t.Fatalf("scope %d, want %d", ans.ScopePrefix, tc.wantScope)
				}
				if ans.TTL < 20 || ans.TTL > 300 {
					t.Fatalf("TTL %d outside [20,300]", ans.TTL)
				}
			}
		})
	}
}

func TestDispatcherStates(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	ask := func(t *testing.T, d *Dispatcher, ecs string) string {
		t.Helper()
		ans, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver, ECS: netip.MustParsePrefix(ecs)})
		if err != nil {
			t.Fatal(err)
		}
		return ans.Addrs[0].String()
	}
	t.Run("down members leave the answers, up again come back", func(t *testing.T) {
		d, _ := newTestDispatcher(t, "geo-load", clock)
		for _, m := range []string{"fra1", "ams1"} {
			if err := d.SetHealth("www.example.org", m, Health{State: probe.StateDown}); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 {
			if got := regionOf[ask(t, d, "198.51.100.0/24")]; got == "EU" {
				t.Fatalf("EU members are down but were answered")
			}
		}
		if err := d.SetHealth("www.example.org", "fra1", Health{State: probe.StateUp}); err != nil {
			t.Fatal(err)
		}
		if got := ask(t, d, "198.51.100.0/24"); got != "10.0.1.1" {
			t.Fatalf("fra1 is up again; EU clients got %s", got)
		}
	})
	t.Run("a full region spills to the next nearest", func(t *testing.T) {
		d, _ := newTestDispatcher(t, "nearest", clock)
		for _, m := range []string{"fra1", "ams1"} {
			if err := d.SetHealth("www.example.org", m, Health{State: probe.StateUp, Load: 100000, Reported: now}); err != nil {
				t.Fatal(err)
			}
		}
		for range 100 {
			if got := regionOf[ask(t, d, "198.51.100.0/24")]; got != "NA" {
				t.Fatalf("EU is full: EU clients must spill to NA (the next nearest), got %s", got)
			}
		}
	})
	t.Run("draining is left out like down", func(t *testing.T) {
		d, _ := newTestDispatcher(t, "geo-load", clock)
		commit, err := d.PrepareMembers(dispatchSet(t, "geo-load"), map[string][]string{"www.example.org.": {"sin1"}})
		if err != nil {
			t.Fatal(err)
		}
		commit()
		for range 100 {
			if got := ask(t, d, "192.0.2.0/24"); got == "10.0.3.1" {
				t.Fatal("a draining member was answered")
			}
		}
	})
	t.Run("all down: fail open, counted", func(t *testing.T) {
		d, reg := newTestDispatcher(t, "geo-load", clock)
		for _, m := range []string{"fra1", "ams1", "nyc1", "sfo1", "sin1", "tyo1"} {
			if err := d.SetHealth("www.example.org", m, Health{State: probe.StateDown}); err != nil {
				t.Fatal(err)
			}
		}
		if got := ask(t, d, "198.51.100.0/24"); got == "" {
			t.Fatal("fail open must still answer")
		}
		if n := testutil.ToFloat64(d.failOpen.WithLabelValues("www.example.org.")); n != 1 {
			t.Errorf("fail-open count %v, want 1", n)
		}
		_ = reg
	})
	t.Run("unknown member and group are errors", func(t *testing.T) {
		d, _ := newTestDispatcher(t, "geo-load", clock)
		if err := d.SetHealth("www.example.org", "nope", Health{}); err == nil {
			t.Error("unknown member accepted")
		}
		if err := d.SetHealth("nope.example.org", "fra1", Health{}); err == nil {
			t.Error("unknown group accepted")
		}
	})
	t.Run("states survive a reload", func(t *testing.T) {
		d, _ := newTestDispatcher(t, "geo-load", clock)
		if err := d.SetHealth("www.example.org", "sin1", Health{State: probe.StateDown}); err != nil {
			t.Fatal(err)
		}
		if err := d.Load(dispatchSet(t, "geo-load")); err != nil {
			t.Fatal(err)
		}
		e, err := d.Explain("www.example.org", dns.TypeA, resolver, netip.MustParsePrefix("192.0.2.0/24"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range e.Members {
			if m.Name == "sin1" && m.State != probe.StateDown.String() {
				t.Errorf("sin1 is %s after reload, want down", m.State)
			}
		}
	})
}

// TestDispatcherHiddenLoad: answers between two reports book their hidden
// load, so a burst of new resolvers in one region spills before the region
// reports full; a report a window later, which shows their clients, takes
// the booking in.
func TestDispatcherHiddenLoad(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	d, err := New(Options{Registry: reg, Now: func() time.Time { return now }, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Load(dispatchSetCap(t, "geo-load", "100")); err != nil {
		t.Fatal(err)
	}
	eu := 0
	for i := range 40 {
		// 40 resolvers in Germany (ECS /56s), each asking for the first time.
		ecs := netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, 1, byte(i), 0}), 56)
		ans, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA,
			Client: resolver, ECS: ecs})
		if err != nil {
			t.Fatal(err)
		}
		if regionOf[ans.Addrs[0].String()] == "EU" {
			eu++
		}
	}
	t.Logf("a burst of 40 new EU resolvers: %d went to EU (2 members of capacity 100, 10 load units per answer)", eu)
	if eu < 10 || eu > 25 {
		t.Errorf("%d of 40 burst answers went to EU; want the EU pair filled to its high watermark (~18) then spill", eu)
	}
	// The same resolver asking again moves its load, it does not add it.
	for range 40 {
		if _, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA,
			Client: resolver, ECS: netip.MustParsePrefix("2001:db8:1:6400::/56")}); err != nil {
			t.Fatal(err)
		}
	}
	live, _ := d.Live("www.example.org")
	var pending float64
	for _, l := range live {
		pending += l.Pending
	}
	if pending < 400 || pending > 420 {
		t.Errorf("pending load of the group after 40 + 1 resolvers = %.1f, want 410 ± 10 (10 load units each; a resolver asking again moves its load)", pending)
	}
	now = now.Add(10 * time.Second)
	for _, m := range []string{"fra1", "ams1"} {
		if err := d.SetHealth("www.example.org", m, Health{State: probe.StateUp, Load: 10, Reported: now, Window: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	ans, _ := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA,
		Client: resolver, ECS: netip.MustParsePrefix("198.51.100.0/24")})
	if regionOf[ans.Addrs[0].String()] != "EU" {
		t.Errorf("after a report of 10%% load, EU clients go to EU again; got %v", ans.Addrs)
	}
}

// TestDispatcherAdaptiveTTL: with no load report (the copies-in-cache
// model), a new scope gets ttl.unseen (ttl.min here), one that keeps
// asking gets the shortest TTL and a light one seen before a long one.
func TestDispatcherAdaptiveTTL(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	d, _ := newTestDispatcher(t, "geo-load", func() time.Time { return now })
	heavy := netip.MustParsePrefix("198.51.100.0/24")
	lightPrefix := netip.MustParsePrefix("203.0.113.0/24")
	if _, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver, ECS: lightPrefix}); err != nil {
		t.Fatal(err)
	}
	var first, last uint32
	for i := range 2000 {
		now = now.Add(50 * time.Millisecond)
		ans, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver, ECS: heavy})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = ans.TTL
		}
		last = ans.TTL
	}
	light, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver, ECS: lightPrefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("heavy scope TTL %d → %d; a light scope seen before gets %d", first, last, light.TTL)
	if first != 20 || last != 20 {
		t.Errorf("heavy scope: TTL %d → %d, want ttl.unseen (20) for its first answer and ttl.min (20) once it carries the traffic", first, last)
	}
	if light.TTL <= last {
		t.Errorf("a light scope (TTL %d) must get a longer TTL than the heavy one (%d)", light.TTL, last)
	}
}

func TestDispatcherExplain(t *testing.T) {
	d, _ := newTestDispatcher(t, "geo-load", time.Now)
	e, err := d.Explain("www.example.org", dns.TypeA, resolver, netip.MustParsePrefix("198.51.100.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Source != "mmdb" || e.Location.Country != "DE" || len(e.Answer) != 1 || len(e.Members) != 6 || e.Why == "" {
		t.Fatalf("explanation %+v", e)
	}
	if e.Answer[0] != "fra1" && e.Answer[0] != "ams1" {
		t.Errorf("EU client answered %v", e.Answer)
	}
	for _, m := range e.Members {
		if m.Name == "fra1" && m.DistanceKm != 0 {
			t.Errorf("fra1 is %v km from Frankfurt, want 0", m.DistanceKm)
		}
	}
	if _, err := d.Explain("nope.example.org", dns.TypeA, resolver, netip.Prefix{}); err == nil {
		t.Error("explain of an unknown group must fail")
	}
}

// BenchmarkGroupAnswer measures the group answer path: the dispatcher alone
// and the whole edge (unpack, answer, pack) for a group query with ECS.
func BenchmarkGroupAnswer(b *testing.B) {
	d, _ := newTestDispatcher(b, "geo-load", time.Now)
	q := dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver, ECS: netip.MustParsePrefix("198.51.100.0/24")}
	b.Run("dispatcher", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.AnswerGroup(context.Background(), q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("edge_with_ecs", func(b *testing.B) {
		s, err := dnsd.New(dnsd.Options{Groups: d})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Load(dispatchSet(b, "geo-load")); err != nil {
			b.Fatal(err)
		}
		m := new(dns.Msg).SetQuestion("www.example.org.", dns.TypeA)
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_SUBNET{
			Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.IP{198, 51, 100, 0}})
		w := &lastWriter{}
		b.ReportAllocs()
		for b.Loop() {
			s.ServeMsg(context.Background(), w, m, "udp")
		}
		if w.last == nil || len(w.last.Answer) != 1 {
			b.Fatalf("reply %v", w.last)
		}
	})
}

// lastWriter is an in-process dns.ResponseWriter that keeps the last reply.
type lastWriter struct{ last *dns.Msg }

func (w *lastWriter) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (w *lastWriter) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 5353}
}
func (w *lastWriter) WriteMsg(m *dns.Msg) error {
	if _, err := m.Pack(); err != nil {
		return err
	}
	w.last = m
	return nil
}
func (w *lastWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *lastWriter) Close() error                { return nil }
func (w *lastWriter) TsigStatus() error           { return nil }
func (w *lastWriter) TsigTimersOnly(bool)         {}
func (w *lastWriter) Hijack()                     {}

// TestDispatcherBandwidth: a member whose uplink is full (bytes per second
// at its bandwidth, few requests per second, so a load of 1% of its
// capacity) is full: the load-aware policies answer with others, and take
// it back once a report shows its uplink with room again.
func TestDispatcherBandwidth(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const bandwidth = 125e6 // 1Gbit/s
	report := func(member string, bytesPerSecond float64, at time.Time) probe.Update {
		return probe.Update{Group: "www.example.org.", Member: member, State: probe.StateUp, HasReport: true, Report: probe.Report{
			Group: "www.example.org.", Member: member, Seq: 1, Time: at, R: 1, Load: probe.LoadOf(1, 0),
			BytesPerSecond: bytesPerSecond, Capacity: 1000, Bandwidth: bandwidth,
		}}
	}
	eu := netip.MustParsePrefix("198.51.100.0/24")
	cases := []struct {
		name      string
		policy    string
		bandwidth string  // every member's, in dnsd.yaml
		bytes     float64 // what fra1 and ams1 report, per second
		wantEU    bool    // EU clients still get EU members
	}{
		{"geo-load: uplinks full, EU spills", "geo-load", "1Gbit/s", bandwidth, false},
		{"geo-load: uplinks over the high watermark", "geo-load", "1Gbit/s", 0.95 * bandwidth, false},
		{"geo-load: uplinks with room", "geo-load", "1Gbit/s", 0.3 * bandwidth, true},
		{"geo-load: no bandwidth configured, bytes do not count", "geo-load", "0", bandwidth, true},
		{"nearest: uplinks full, EU spills", "nearest", "1Gbit/s", bandwidth, false},
		{"least-load: uplinks full, answered last", "least-load", "1Gbit/s", bandwidth, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(Options{Now: func() time.Time { return now }, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Load(dispatchSetBandwidth(t, tc.policy, "1000", tc.bandwidth)); err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"fra1", "ams1", "nyc1", "sfo1", "sin1", "tyo1"} {
				bytes := 0.0
				if m == "fra1" || m == "ams1" { // the EU members
					bytes = tc.bytes
				}
				d.Observe(report(m, bytes, now))
			}
			for i := range 50 {
				ans, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver, ECS: eu})
				if err != nil {
					t.Fatal(err)
				}
				if got := regionOf[ans.Addrs[0].String()] == "EU"; got != tc.wantEU {
					t.Fatalf("answer %d: %v (EU: %v), want EU: %v", i, ans.Addrs, got, tc.wantEU)
				}
			}
			e, err := d.Explain("www.example.org", dns.TypeA, resolver, eu)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range e.Members {
				if m.Name != "fra1" {
					continue
				}
				if m.BytesPerSecond != tc.bytes || m.Load != 10 {
					t.Errorf("explained fra1 %+v: want the reported bytes per second and load", m)
				}
				if full := tc.bandwidth != "0" && tc.bytes >= 0.9*bandwidth; full != strings.Contains(m.Note, "by bandwidth") {
					t.Errorf("explained fra1: note %q, utilization %v", m.Note, m.Utilization)
				}
			}
			if tc.wantEU {
				return
			}
			// A report with room on the uplink brings EU back at once.
			later := now.Add(time.Second)
			d.Observe(report("fra1", 0.1*bandwidth, later))
			d.Observe(report("ams1", 0.1*bandwidth, later))
			ans, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver, ECS: eu})
			if err != nil {
				t.Fatal(err)
			}
			if tc.policy != "least-load" && regionOf[ans.Addrs[0].String()] != "EU" {
				t.Errorf("after reports with room on the uplink EU clients got %v", ans.Addrs)
			}
		})
	}
}

// TestSerialReplays: a Serial dispatcher gives the same answers from the
// same seed whatever the garbage collector does to the pool of
// generators (a simulation's replay), and one of another seed other
// answers.
func TestSerialReplays(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	answers := func(seed uint64) []string {
		d, err := New(Options{Now: func() time.Time { return now }, Seed: seed, Serial: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Load(dispatchSet(t, "weighted")); err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := range 200 {
			runtime.GC() // empties a sync.Pool: a pooled generator would be a new one
			a, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolverAt(i % 50)})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, a.Addrs[0].String())
		}
		return out
	}
	a, b, c := answers(7), answers(7), answers(8)
	if !slices.Equal(a, b) {
		t.Errorf("the same seed gave other answers:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 gave the same 200 answers")
	}
}
