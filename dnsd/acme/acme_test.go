package acme

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/zones"
)

const (
	v1 = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
	v2 = "9jg46WB3rR_AHD-EBXdN7cBkH1WOu0tA3M9fm21mqTI"
	v3 = "_R8gIOrGqzRrXcQ2nyvG1bU-6hi8L2xW4CjwQ3d5pAs"
	v4 = "pbfhoCQ1bA8Y3fN5e3GZ1bmHiI8vKhhM5vrD5xbNN2U"
	v5 = "Zk3vDHz1sK0y8t2hx4Qn6bG7cJ9mE1pR5uW3aT0oLiY"
)

// testSet is a zone example.test (with a delegation at sub) and a group
// www.example.test with members fra1 (host fra1.mirrors.example.test)
// and ams1 (host ams1.example.net, outside every zone).
func testSet(t testing.TB, members ...zones.MemberConfig) *zones.Set {
	t.Helper()
	var rrs []dns.RR
	for _, s := range []string{
		"example.test. 3600 IN SOA ns1.example.test. h.example.test. 1 7200 3600 1209600 300",
		"example.test. 3600 IN NS ns1.example.test.",
		"ns1.example.test. 3600 IN A 192.0.2.53",
		"sub.example.test. 3600 IN NS ns.elsewhere.net.",
	} {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		rrs = append(rrs, rr)
	}
	if members == nil {
		members = []zones.MemberConfig{
			{Name: "fra1", Host: "fra1.mirrors.example.test."},
			{Name: "ams1", Host: "ams1.example.net"},
			{Name: "sub1", Host: "m.sub.example.test."},
		}
	}
	g := &zones.GroupConfig{Name: "www.example.test.", Members: members}
	return &zones.Set{Zones: []*zones.Zone{zones.NewZone("example.test.", rrs)}, Groups: map[string]*zones.GroupConfig{g.Name: g}}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, qname, value, want, err string
	}{
		{name: "group name", qname: "www.example.test", value: v1, want: "www.example.test."},
		{name: "fqdn and case", qname: "WWW.Example.Test.", value: v2, want: "www.example.test."},
		{name: "short value", qname: "www.example.test", value: v1[:42], err: "43 base64url"},
		{name: "long value", qname: "www.example.test", value: v1 + "A", err: "43 base64url"},
		{name: "standard alphabet", qname: "www.example.test", value: "+" + v1[1:], err: "digest"},
		{name: "padding", qname: "www.example.test", value: v1[:42] + "=", err: "digest"},
		{name: "not canonical last character", qname: "www.example.test", value: v1[:42] + "1", err: "digest"},
		{name: "empty name", qname: "", value: v1, err: "want a domain name"},
		{name: "wildcard", qname: "*.example.test", value: v1, err: "without a wildcard"},
		{name: "challenge name", qname: "_acme-challenge.www.example.test", value: v1, err: "not the challenge's"},
		{name: "root", qname: ".", value: v1, err: "not the challenge's"},
		{name: "label too long", qname: strings.Repeat("a", 64) + ".example.test", value: v1, err: "domain name"},
		{name: "name too long", qname: strings.Repeat("abcdefghi.", 24) + "test", value: v1, err: "too long"},
		{name: "space", qname: "www example.test", value: v1, err: "letters, digits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Validate(tc.qname, tc.value)
			if tc.err != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Validate = %q, %v; want ErrInvalid with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Validate = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestEntitled(t *testing.T) {
	set := testSet(t)
	for _, tc := range []struct {
		name, group, member, qname, err string
	}{
		{name: "group name", group: "www.example.test.", member: "fra1", qname: "www.example.test."},
		{name: "group any case", group: "WWW.example.test", member: "fra1", qname: "www.example.test."},
		{name: "own host", group: "www.example.test.", member: "fra1", qname: "fra1.mirrors.example.test."},
		{name: "other member's host", group: "www.example.test.", member: "ams1", qname: "fra1.mirrors.example.test.", err: "neither"},
		{name: "a name of the zone", group: "www.example.test.", member: "fra1", qname: "example.test.", err: "neither"},
		{name: "host outside the zones", group: "www.example.test.", member: "ams1", qname: "ams1.example.net.", err: "in no zone"},
		{name: "host below a delegation", group: "www.example.test.", member: "sub1", qname: "m.sub.example.test.", err: "delegated"},
		{name: "unknown member", group: "www.example.test.", member: "nobody", qname: "www.example.test.", err: "no member"},
		{name: "unknown group", group: "ftp.example.test.", member: "fra1", qname: "ftp.example.test.", err: "no group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Entitled(set, tc.group, tc.member, tc.qname)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Entitled = %v; want ErrForbidden with %q", err, tc.err)
			}
		})
	}
	if err := Entitled(nil, "www.example.test.", "fra1", "www.example.test."); !errors.Is(err, ErrForbidden) {
		t.Errorf("no set: %v", err)
	}
}

func TestChallengeName(t *testing.T) {
	for q, want := range map[string]string{
		"_acme-challenge.www.example.test.": "www.example.test.",
		"_ACME-Challenge.WWW.example.test":  "www.example.test.",
		"_acme-challenge.":                  "",
		"www.example.test.":                 "",
		"x_acme-challenge.www.example.test": "",
		"_acme-challengex.www.example.test": "",
	} {
		t.Run(q, func(t *testing.T) {
			if got := ChallengeName(q); got != want {
				t.Errorf("ChallengeName(%q) = %q, want %q", q, got, want)
			}
		})
	}
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// newBook returns a Book over a Memory on set (swappable through *set)
// with a clock, and what the DNS reads.
func newBook(t *testing.T, set **zones.Set) (*Book, *clock, Served, *prometheus.Registry) {
	t.Helper()
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	reg := prometheus.NewRegistry()
	mem := NewMemory()
	b, err := New(Options{Set: func() *zones.Set { return *set }, Store: mem, Now: c.now, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	return b, c, Served{Store: mem, Now: c.now}, reg
}

func results(t *testing.T, b *Book) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range Results {
		out[r] = testutil.ToFloat64(b.results.WithLabelValues(r))
	}
	return out
}

func TestBookPublishServeRemove(t *testing.T) {
	set := testSet(t)
	b, _, dns, _ := newBook(t, &set)
	q := "_acme-challenge.www.example.test."
	for _, p := range []struct{ member, value string }{{"fra1", v2}, {"ams1", v1}, {"fra1", v2}} {
		if _, err := b.Publish("www.example.test", p.member, "www.example.test", p.value); err != nil {
			t.Fatalf("publish %s: %v", p.member, err)
		}
	}
	if _, err := b.Publish("www.example.test.", "fra1", "fra1.mirrors.example.test", v3); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(dns.TXT(q), " "); got != v2+" "+v1 && got != strings.Join([]string{v1, v2}, " ") {
		t.Fatalf("TXT = %q", got)
	}
	if got := dns.TXT("_acme-challenge.fra1.mirrors.example.test."); len(got) != 1 || got[0] != v3 {
		t.Fatalf("host TXT = %q", got)
	}
	if got := dns.TXT("www.example.test."); got != nil {
		t.Fatalf("TXT of a name that is not a challenge's = %q", got)
	}
	if removed, err := b.Remove("www.example.test.", "ams1", "www.example.test.", v1); err != nil || !removed {
		t.Fatalf("remove = %v, %v", removed, err)
	}
	if removed, err := b.Remove("www.example.test.", "ams1", "www.example.test.", v1); err != nil || removed {
		t.Fatalf("remove again = %v, %v", removed, err)
	}
	// ams1 can not remove fra1's value: its key is ams1's.
	if removed, _ := b.Remove("www.example.test.", "ams1", "www.example.test.", v2); removed {
		t.Fatal("ams1 removed fra1's value")
	}
	if got := dns.TXT(q); len(got) != 1 || got[0] != v2 {
		t.Fatalf("TXT after remove = %q", got)
	}
	if got := len(b.List()); got != 2 {
		t.Fatalf("List has %d, want 2", got)
	}
	want := map[string]float64{"published": 4, "removed": 1}
	for r, n := range results(t, b) {
		if n != want[r] {
			t.Errorf("result %s = %g, want %g", r, n, want[r])
		}
	}
}

func TestBookExpiry(t *testing.T) {
	set := testSet(t)
	b, clk, dns, _ := newBook(t, &set)
	q := "_acme-challenge.www.example.test."
	if _, err := b.Publish("www.example.test.", "fra1", "www.example.test.", v1); err != nil {
		t.Fatal(err)
	}
	clk.add(ChallengeTTL / 2)
	if _, err := b.Publish("www.example.test.", "ams1", "www.example.test.", v2); err != nil {
		t.Fatal(err)
	}
	clk.add(ChallengeTTL/2 - time.Second)
	if got := dns.TXT(q); len(got) != 2 {
		t.Fatalf("1 s before the first expires: %q", got)
	}
	clk.add(time.Second)
	if got := dns.TXT(q); len(got) != 1 || got[0] != v2 {
		t.Fatalf("at the first's expiry: %q", got)
	}
	if n := b.Sweep(); n != 1 {
		t.Errorf("Sweep dropped %d, want 1", n)
	}
	clk.add(ChallengeTTL / 2)
	if got := dns.TXT(q); got != nil {
		t.Fatalf("after both expired: %q", got)
	}
	if n := b.Sweep(); n != 1 || len(b.store.List()) != 0 {
		t.Errorf("Sweep dropped %d, store keeps %d", n, len(b.store.List()))
	}
}

// TestBookMemberRemoved: a member that leaves loses its values by
// Forget (what its watcher is told) or else at the next Sweep.
func TestBookMemberRemoved(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop func(b *Book) int
	}{
		{"forget", func(b *Book) int {
			n := len(b.store.List())
			if err := Forget(b.store, "WWW.example.test", "fra1"); err != nil {
				t.Fatal(err)
			}
			return n - len(b.store.List())
		}},
		{"sweep", func(b *Book) int { return b.Sweep() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := testSet(t)
			b, _, dns, _ := newBook(t, &set)
			for m, v := range map[string]string{"fra1": v1, "ams1": v2} {
				if _, err := b.Publish("www.example.test.", m, "www.example.test.", v); err != nil {
					t.Fatal(err)
				}
			}
			set = testSet(t, zones.MemberConfig{Name: "ams1", Host: "ams1.example.net."})
			if got := b.List(); len(got) != 1 || got[0].Member != "ams1" {
				t.Fatalf("List after fra1 left: %v", got)
			}
			if n := tc.drop(b); n != 1 {
				t.Errorf("dropped %d, want fra1's 1", n)
			}
			if got := dns.TXT("_acme-challenge.www.example.test."); len(got) != 1 || got[0] != v2 {
				t.Fatalf("served after fra1 left: %q", got)
			}
		})
	}
}

func TestBookLimits(t *testing.T) {
	t.Run("live values", func(t *testing.T) {
		set := testSet(t)
		b, _, _, _ := newBook(t, &set)
		for i, v := range []string{v1, v2, v3, v4} {
			if _, err := b.Publish("www.example.test.", "fra1", "www.example.test.", v); err != nil {
				t.Fatalf("value %d: %v", i, err)
			}
		}
		if _, err := b.Publish("www.example.test.", "fra1", "www.example.test.", v5); !errors.Is(err, ErrLimited) {
			t.Fatalf("fifth value: %v, want ErrLimited", err)
		}
		if _, err := b.Publish("www.example.test.", "fra1", "www.example.test.", v4); err != nil {
			t.Fatalf("publishing a live value again: %v", err)
		}
		if _, err := b.Publish("www.example.test.", "ams1", "www.example.test.", v5); err != nil {
			t.Fatalf("another member: %v", err)
		}
	})
	t.Run("rate", func(t *testing.T) {
		set := testSet(t)
		b, clk, _, _ := newBook(t, &set)
		for i := range RequestBurst {
			if _, err := b.Publish("www.example.test.", "fra1", "www.example.test.", v1); err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}
		before := b.store.List()
		for _, v := range []string{v1, v2, "bad"} {
			if _, err := b.Publish("www.example.test.", "fra1", "www.example.test.", v); !errors.Is(err, ErrLimited) {
				t.Fatalf("beyond the burst: %v, want ErrLimited", err)
			}
		}
		if _, err := b.Remove("www.example.test.", "fra1", "www.example.test.", v1); !errors.Is(err, ErrLimited) {
			t.Fatalf("remove beyond the burst: %v", err)
		}
		if after := b.store.List(); len(after) != len(before) || !after[0].Expires.Equal(before[0].Expires) {
			t.Fatalf("a limited request changed the store: %v → %v", before, after)
		}
		if _, err := b.Publish("www.example.test.", "ams1", "www.example.test.", v2); err != nil {
			t.Fatalf("another member's bucket: %v", err)
		}
		clk.add(RequestEvery)
		if _, err := b.Publish("www.example.test.", "fra1", "www.example.test.", v2); err != nil {
			t.Fatalf("after a refill: %v", err)
		}
		if got := results(t, b)["limited"]; got != 4 {
			t.Errorf("limited = %g, want 4", got)
		}
	})
	t.Run("refused", func(t *testing.T) {
		set := testSet(t)
		b, _, _, _ := newBook(t, &set)
		for _, tc := range []struct {
			member, name, value string
			err                 error
			result              string
		}{
			{"fra1", "www.example.test.", "short", ErrInvalid, "invalid"},
			{"fra1", "example.test.", v1, ErrForbidden, "forbidden"},
			{"ams1", "fra1.mirrors.example.test.", v1, ErrForbidden, "forbidden"},
			{"ghost", "www.example.test.", v1, ErrForbidden, "forbidden"},
		} {
			if _, err := b.Publish("www.example.test.", tc.member, tc.name, tc.value); !errors.Is(err, tc.err) {
				t.Errorf("%s %s: %v, want %v", tc.member, tc.name, err, tc.err)
			}
		}
		if r := results(t, b); r["invalid"] != 1 || r["forbidden"] != 3 || r["published"] != 0 {
			t.Errorf("results %v", r)
		}
		if len(b.store.List()) != 0 {
			t.Error("a refused request was kept")
		}
	})
}

func TestMetricsLint(t *testing.T) {
	set := testSet(t)
	_, _, _, reg := newBook(t, &set)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// FuzzValidate: whatever comes in, Validate either refuses it with
// ErrInvalid or returns a canonical name that a challenge name can be
// made of, with a value of ValueLen base64url characters.
func FuzzValidate(f *testing.F) {
	for _, s := range [][2]string{{"www.example.test", v1}, {"_acme-challenge.x.", v2}, {"*.x", v1}, {"a..b", v1}, {"x", "=" + v1[1:]}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		got, err := Validate(name, value)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if len(value) != ValueLen || strings.Trim(value, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Fatalf("accepted value %q", value)
		}
		if got != dns.CanonicalName(got) || ChallengeName(Label+"."+got) != got {
			t.Fatalf("name %q → %q: not canonical or not a challenge's", name, got)
		}
		if _, ok := dns.IsDomainName(Label + "." + got); !ok || len(Label+"."+got) > 255 {
			t.Fatalf("challenge name of %q is not a domain name", got)
		}
	})
}
