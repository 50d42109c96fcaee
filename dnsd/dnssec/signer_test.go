package dnssec

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/transmirror/transmirror/zones"
)

func rrs(t *testing.T, lines ...string) []dns.RR {
	t.Helper()
	var out []dns.RR
	for _, l := range lines {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rr)
	}
	return out
}

func newTestSigner(t *testing.T, now *time.Time, size int) (*Signer, Metrics, *zones.SigningKey) {
	t.Helper()
	k, _, err := zones.ReadKey("example.org.", filepath.Join("testdata", "Kexample.org.+015+31855"))
	if err != nil {
		t.Fatal(err)
	}
	m := Metrics{Signed: prometheus.NewCounter(prometheus.CounterOpts{Name: "s"}), Hits: prometheus.NewCounter(prometheus.CounterOpts{Name: "h"})}
	s := New("example.org.", []*zones.SigningKey{k}, func() time.Time { return *now }, m, size)
	if s == nil {
		t.Fatal("no signer")
	}
	return s, m, k
}

// TestCacheKey: the same records in another order, owner case or TTL
// are the same RRset to the cache; other records or another original TTL
// are not.
func TestCacheKey(t *testing.T) {
	base := cacheKey(rrs(t, "a.example.org. 60 IN A 192.0.2.1", "a.example.org. 60 IN A 192.0.2.2"), 300)
	for _, tt := range []struct {
		name string
		set  []dns.RR
		orig uint32
		same bool
	}{
		{"other order", rrs(t, "a.example.org. 60 IN A 192.0.2.2", "a.example.org. 60 IN A 192.0.2.1"), 300, true},
		{"other case", rrs(t, "A.Example.ORG. 60 IN A 192.0.2.1", "a.example.org. 60 IN A 192.0.2.2"), 300, true},
		{"other TTL", rrs(t, "a.example.org. 20 IN A 192.0.2.1", "a.example.org. 20 IN A 192.0.2.2"), 300, true},
		{"other original TTL", rrs(t, "a.example.org. 60 IN A 192.0.2.1", "a.example.org. 60 IN A 192.0.2.2"), 60, false},
		{"other record", rrs(t, "a.example.org. 60 IN A 192.0.2.1", "a.example.org. 60 IN A 192.0.2.3"), 300, false},
		{"fewer records", rrs(t, "a.example.org. 60 IN A 192.0.2.1"), 300, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if same := cacheKey(tt.set, tt.orig) == base; same != tt.same {
				t.Errorf("same key: %v, want %v", same, tt.same)
			}
		})
	}
}

// TestSignRefreshAndBound: a cached signature is used until a day after
// it was made, then made again; the cache holds at most its size.
func TestSignRefreshAndBound(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, m, k := newTestSigner(t, &now, 8)
	set := rrs(t, "a.example.org. 60 IN A 192.0.2.1")
	sigs, err := s.Sign(set, 60)
	if err != nil || len(sigs) != 1 {
		t.Fatalf("%v %v", sigs, err)
	}
	sig := sigs[0].(*dns.RRSIG)
	if err := sig.Verify(k.DNSKEY, set); err != nil {
		t.Fatal(err)
	}
	if got, want := time.Unix(int64(sig.Expiration), 0).Sub(now), 7*24*time.Hour; got != want {
		t.Errorf("valid for %v, want %v", got, want)
	}
	now = now.Add(23 * time.Hour)
	again, _ := s.Sign(set, 60)
	if again[0] != sigs[0] || testutil.ToFloat64(m.Signed) != 1 || testutil.ToFloat64(m.Hits) != 1 {
		t.Errorf("within a day: made %v, hits %v", testutil.ToFloat64(m.Signed), testutil.ToFloat64(m.Hits))
	}
	now = now.Add(2 * time.Hour)
	if fresh, _ := s.Sign(set, 60); fresh[0].(*dns.RRSIG).Expiration <= sig.Expiration {
		t.Error("not made again after a day")
	}
	for i := range 100 {
		if _, err := s.Sign(rrs(t, "b.example.org. 60 IN TXT \""+string(rune('a'+i%26))+string(rune('a'+i/26))+"\""), 60); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.cur) + len(s.old); n > 8 {
		t.Errorf("%d RRsets cached, want at most 8", n)
	}
}

// TestNewWithoutActiveKeys: no signer when no key is active.
func TestNewWithoutActiveKeys(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k, _, err := zones.ReadKey("example.org.", filepath.Join("testdata", "Kexample.org.+013+54815"))
	if err != nil {
		t.Fatal(err)
	}
	k.Inactive = now.Add(-time.Minute)
	if s := New("example.org.", []*zones.SigningKey{k}, func() time.Time { return now }, Metrics{}, 0); s != nil {
		t.Error("a signer with only an inactive key")
	}
}

// BenchmarkSign: an RRset signed cold (ECDSAP256SHA256 and ED25519,
// every RRset new) and from the cache.
func BenchmarkSign(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	for _, key := range []string{"Kexample.org.+013+54815", "Kexample.org.+015+31855"} {
		k, _, err := zones.ReadKey("example.org.", filepath.Join("testdata", key))
		if err != nil {
			b.Fatal(err)
		}
		alg := dns.AlgorithmToString[k.DNSKEY.Algorithm]
		b.Run(alg+"/cold", func(b *testing.B) {
			s := New("example.org.", []*zones.SigningKey{k}, func() time.Time { return now }, Metrics{}, 1<<20)
			i := 0
			for b.Loop() {
				i++
				rr := &dns.A{Hdr: dns.RR_Header{Name: "a.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
					A: []byte{10, byte(i >> 16), byte(i >> 8), byte(i)}}
				if _, err := s.Sign([]dns.RR{rr}, 60); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(alg+"/cached", func(b *testing.B) {
			s := New("example.org.", []*zones.SigningKey{k}, func() time.Time { return now }, Metrics{}, 0)
			set := []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: []byte{10, 0, 0, 1}}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Sign(set, 60); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
