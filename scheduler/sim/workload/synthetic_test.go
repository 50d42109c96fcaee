package workload

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"strings"
	"testing"
	"time"
)

func newStream(t testing.TB, s Synthetic) *Stream {
	t.Helper()
	st, err := s.New()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// digest hashes the stream's requests, and checks they are in time order.
func digest(t testing.TB, st *Stream) (uint64, int) {
	t.Helper()
	h := fnv.New64a()
	var buf [32]byte
	n, last := 0, int64(math.MinInt64)
	for r := range st.Requests() {
		if r.At < last {
			t.Fatalf("request %d at %d, before the one before it (%d)", n, r.At, last)
		}
		last = r.At
		binary.LittleEndian.PutUint64(buf[0:], uint64(r.At))
		binary.LittleEndian.PutUint64(buf[8:], r.Size)
		binary.LittleEndian.PutUint32(buf[16:], r.Client)
		binary.LittleEndian.PutUint32(buf[20:], r.Object)
		binary.LittleEndian.PutUint16(buf[24:], r.Status)
		h.Write(buf[:26])
		n++
	}
	return h.Sum64(), n
}

// TestSyntheticDeterministic: the same Synthetic gives the same requests,
// every time its stream is read and from a new stream; another seed
// others; the stream stops where its reader does.
func TestSyntheticDeterministic(t *testing.T) {
	s := Synthetic{Seed: 1, Requests: 50_000, Objects: 5_000, Clients: 2_000, Resolvers: 50, Regions: 3, Diurnal: 0.5}
	st := newStream(t, s)
	a, n := digest(t, st)
	b, _ := digest(t, st)
	c, _ := digest(t, newStream(t, s))
	s.Seed = 2
	d, _ := digest(t, newStream(t, s))
	if n != 50_000 || a != b || a != c || a == d {
		t.Errorf("%d requests; digests %x %x %x, want the first three equal, and another seed's (%x) not", n, a, b, c, d)
	}
	k := 0
	for range st.Requests() {
		if k++; k == 10 {
			break
		}
	}
	if k != 10 {
		t.Errorf("stopped after %d, want 10", k)
	}
}

// TestSyntheticShapes: the stream has the shapes it was asked for, each
// within its sampling error: Zipf popularity, the sizes' lognormal body
// and Pareto tail, the resolvers' Zipf share of the clients, the regions
// in turn, the day's rate.
func TestSyntheticShapes(t *testing.T) {
	const objects, requests = 1_000, 432_000 // a day at 5 q/s
	st := newStream(t, Synthetic{Seed: 7, Requests: requests, Objects: objects, Clients: 100_000, Resolvers: 100,
		Regions: 3, Rate: 5, Diurnal: 0.5})
	h := func(n int) (s float64) {
		for k := 1; k <= n; k++ {
			s += 1 / float64(k)
		}
		return s
	}
	hits := make([]int, objects)
	perHour := make([]int, 48)
	for r := range st.Requests() {
		hits[r.Object]++
		if hr := int(r.Time().Sub(DefaultStart) / time.Hour); hr < len(perHour) {
			perHour[hr]++
		}
	}
	within := func(name string, got, want, rel float64) {
		t.Helper()
		if math.Abs(got-want) > rel*want {
			t.Errorf("%s: %.4g, want %.4g ± %.0f%%", name, got, want, 100*rel)
		}
	}
	within("share of the most popular object", float64(hits[0])/requests, 1/h(objects), 0.03)
	within("share of the 10th", float64(hits[9])/requests, 0.1/h(objects), 0.1)
	// Sizes of 100,000 objects: a median near e^μ, and above TailMin the
	// tail (7%) and the body's part there (P(Z > (ln 133000 − μ)/σ)).
	big := newStream(t, Synthetic{Seed: 3, Requests: 1, Objects: 100_000})
	below, above := 0, 0
	for _, sz := range big.Sizes {
		if float64(sz) < math.Exp(9.357) {
			below++
		}
		if sz >= 133_000 {
			above++
		}
	}
	z := (math.Log(133_000) - 9.357) / 1.318
	within("share of the sizes above TailMin", float64(above)/1e5, 0.07+0.93*0.5*math.Erfc(z/math.Sqrt2), 0.05)
	within("share of the sizes below e^μ", float64(below)/1e5, 0.93*0.5+0.0, 0.03)
	clients := make([]int, 100)
	for _, r := range st.Population.ClientResolver {
		clients[r]++
	}
	within("the largest resolver's share of the clients", float64(clients[0])/1e5, 1/h(100), 0.03)
	for i, reg := range st.Population.ResolverRegion {
		if int(reg) != i%3 {
			t.Fatalf("resolver %d in region %d, want %d", i, reg, i%3)
		}
	}
	// At 5 q/s, the hours of the day: 18,000·(1 + ½ sin(2π(h + ½ − 9)/24)).
	for hr := range 23 { // the last hour is cut where the requests end
		want := 18_000 * (1 + 0.5*math.Sin(2*math.Pi*(float64(hr)+0.5-9)/24))
		within("requests in hour "+time.Duration(hr*int(time.Hour)).String(), float64(perHour[hr]), want, 0.05)
	}
}

// TestSyntheticErrors: every field out of its range is named.
func TestSyntheticErrors(t *testing.T) {
	_, err := Synthetic{Requests: -1, Regions: 70_000, Alpha: -1, TailShare: 2, Rate: math.NaN(), Diurnal: 1.5, SizeMu: -3}.New()
	for _, want := range []string{"requests: -1", "regions: 70000", "alpha: -1", "tail share: 2", "rate: NaN", "diurnal: 1.5, want 0..1", "size mu: -3"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %q", err, want)
		}
	}
}

// BenchmarkSynthetic: the cost of one request of a stream, and that a
// stream allocates nothing per request (its memory is its tables).
func BenchmarkSynthetic(b *testing.B) {
	st := newStream(b, Synthetic{Seed: 1, Requests: math.MaxInt})
	b.ReportAllocs()
	for range st.Requests() {
		if !b.Loop() {
			break
		}
	}
}
