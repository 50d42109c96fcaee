package popular

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestSketchTop(t *testing.T) {
	type add struct {
		at   time.Duration // after t0
		keys string        // space-separated, each counted once
	}
	tests := []struct {
		name string
		k    int
		adds []add
		at   time.Duration
		n    int
		want []Entry
	}{
		{name: "empty", k: 4, want: []Entry{}},
		{name: "exact under k", k: 4, adds: []add{{0, "a b a c a b"}}, n: 10,
			want: []Entry{{"a", 3, 0}, {"b", 2, 0}, {"c", 1, 0}}},
		{name: "n cuts", k: 4, adds: []add{{0, "a b a c a b"}}, n: 2,
			want: []Entry{{"a", 3, 0}, {"b", 2, 0}}},
		{name: "ties by key", k: 4, adds: []add{{0, "c b a"}}, n: 10,
			want: []Entry{{"a", 1, 0}, {"b", 1, 0}, {"c", 1, 0}}},
		{name: "replacement inherits the minimum", k: 2, adds: []add{{0, "a a a b c"}}, n: 10,
			// c replaces b (count 1): count 2, error 1.
			want: []Entry{{"a", 3, 0}, {"c", 2, 1}}},
		{name: "inherited counts rank below real ones", k: 2, adds: []add{{0, "a a b b d"}}, n: 10,
			// d replaces a or b: the first minimum, a (2): count 3, error 2, guaranteed 1.
			want: []Entry{{"b", 2, 0}, {"d", 3, 2}}},
		{name: "halved after a half life", k: 4, adds: []add{{0, "a a a a b b"}}, at: HalfLife, n: 10,
			want: []Entry{{"a", 2, 0}, {"b", 1, 0}}},
		{name: "not yet halved just before", k: 4, adds: []add{{0, "a a"}}, at: HalfLife - time.Nanosecond, n: 10,
			want: []Entry{{"a", 2, 0}}},
		{name: "new requests outweigh old", k: 4, adds: []add{{0, "old old old old"}, {2 * HalfLife, "new new"}}, at: 2 * HalfLife, n: 10,
			want: []Entry{{"new", 2, 0}, {"old", 1, 0}}},
		{name: "a clock going back halves nothing", k: 4, adds: []add{{HalfLife, "a a"}, {0, "a"}}, at: 0, n: 10,
			want: []Entry{{"a", 3, 0}}},
		{name: "long idle forgets", k: 4, adds: []add{{0, "a"}}, at: 2000 * HalfLife, n: 10, want: []Entry{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSketch(tt.k, HalfLife, t0)
			for _, a := range tt.adds {
				for _, k := range strings.Fields(a.keys) {
					s.Add(t0.Add(a.at), k)
				}
			}
			got := s.Top(t0.Add(tt.at), tt.n)
			if len(got) != len(tt.want) {
				t.Fatalf("Top = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("Top[%d] = %v, want %v (all: %v)", i, got[i], tt.want[i], got)
				}
			}
			if s.Len() > max(tt.k, 0) {
				t.Errorf("Len = %d, more than k = %d", s.Len(), tt.k)
			}
		})
	}
}

// TestSketchFindsHeavyHitters streams a Zipf-like mix over many more keys
// than counters and checks that the heavy keys come out on top, in order.
func TestSketchFindsHeavyHitters(t *testing.T) {
	s := NewSketch(DefaultCounters, HalfLife, t0)
	for round := range 200 {
		for i := range 5 { // heavy: key h0 50 times a round, h1 40, ...
			for range 50 - 10*i {
				s.Add(t0, "h"+string(rune('0'+i)))
			}
		}
		for j := range 100 { // 20000 distinct light keys, each once
			s.Add(t0, "light"+string(rune('a'+j%26))+string(rune('a'+round%26))+string(rune('a'+j/26))+string(rune('a'+round/26)))
		}
	}
	top := s.Top(t0, 5)
	for i, e := range top {
		if want := "h" + string(rune('0'+i)); e.Key != want {
			t.Errorf("Top[%d] = %v, want %s (all %v)", i, e, want, top)
		}
	}
	if s.Len() != DefaultCounters {
		t.Errorf("Len = %d, want %d", s.Len(), DefaultCounters)
	}
}

// FuzzSketch proves the sketch against exact decayed counts: every count
// bounds the true one from above and count − error from below, the
// counters never exceed K, and a key whose true count is more than the
// total over K has a counter.
func FuzzSketch(f *testing.F) {
	f.Add([]byte("aaabbc"), uint8(3))
	f.Add([]byte("abcdefgabcabca\xffaa\xffbb"), uint8(2))
	f.Add([]byte("\xff\xff\xffzzzz\xfe\x01y"), uint8(1))
	f.Fuzz(func(t *testing.T, ops []byte, k uint8) {
		k = k%8 + 1
		s := NewSketch(int(k), HalfLife, t0)
		exact := map[string]float64{}
		now, period := t0, int64(0)
		for _, op := range ops {
			if op >= 0xf0 { // advance the clock by (op−0xef)/3 half lives
				now = now.Add(time.Duration(op-0xef) * HalfLife / 3)
				for p := int64(now.Sub(t0) / HalfLife); period < p; period++ {
					for key := range exact {
						exact[key] /= 2
					}
				}
				continue
			}
			key := string(rune('a' + op%12))
			s.Add(now, key)
			exact[key]++
		}
		var total float64
		for _, v := range exact {
			total += v
		}
		top := s.Top(now, -1)
		if s.Len() > int(k) {
			t.Fatalf("Len = %d > k = %d", s.Len(), k)
		}
		have := map[string]bool{}
		for _, e := range top {
			have[e.Key] = true
			tol := 1e-9 * (1 + e.Count)
			if e.Count+tol < exact[e.Key] || e.Guaranteed() > exact[e.Key]+tol || e.Error < 0 {
				t.Fatalf("%q: count %g error %g, true count %g", e.Key, e.Count, e.Error, exact[e.Key])
			}
		}
		for key, v := range exact {
			if v > total/float64(k)+1e-9 && !have[key] && !math.IsInf(v, 0) {
				if e := s.lookup(key); e == nil {
					t.Fatalf("%q: true count %g > total %g / k %d, but no counter", key, v, total, k)
				}
			}
		}
	})
}

// lookup returns key's counter, nil when it has none.
func (s *Sketch) lookup(key string) *Entry {
	if i, ok := s.index[key]; ok {
		return &s.counters[i]
	}
	return nil
}
