package workload

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Synthetic describes a SURGE-style workload (Barford and Crovella,
// SIGMETRICS 1998): objects of Zipf popularity whose sizes have a
// lognormal body and a Pareto tail, requested by clients behind
// resolvers of Zipf-skewed size, in regions, at a rate that follows the
// day. The zero value of a field takes the default named beside it.
type Synthetic struct {
	// Seed makes the stream: the same Synthetic gives the same requests.
	Seed uint64
	// Requests is how many requests the stream has (DefaultRequests).
	Requests int
	// Objects is how many distinct objects there are (DefaultObjects),
	// Alpha the Zipf exponent of their popularity (1, SURGE's).
	Objects int
	Alpha   float64
	// SizeMu and SizeSigma are the lognormal body of the object sizes,
	// in ln bytes (SURGE's 9.357 and 1.318: a median of 11.6 KB);
	// TailShare of the objects (0.07) have instead a Pareto size of
	// index TailAlpha (1.1) from TailMin bytes (133 KB).
	SizeMu, SizeSigma             float64
	TailShare, TailAlpha, TailMin float64
	// MaxSize caps a size, in bytes (DefaultMaxSize): the Pareto tail
	// has no end of its own.
	MaxSize float64
	// Clients is how many clients there are (DefaultClients), behind
	// Resolvers resolvers (DefaultResolvers) whose numbers of clients
	// are Zipf of exponent ResolverAlpha (1); the resolvers are spread
	// over Regions regions in turn (1).
	Clients, Resolvers, Regions int
	ResolverAlpha               float64
	// Rate is the mean request rate, per second (DefaultRate), and
	// Diurnal the amplitude of its day: the rate at hour h of Start's
	// day is Rate·(1 + Diurnal·sin(2π(h−9)/24)), at its mean at 09:00
	// and at its peak at 15:00. 0 is a flat rate; at most 1.
	Rate, Diurnal float64
	// Start is when the stream starts (DefaultStart).
	Start time.Time
}

// Defaults of Synthetic.
const (
	DefaultRequests  = 1_000_000
	DefaultObjects   = 100_000
	DefaultClients   = 100_000
	DefaultResolvers = 1_000
	DefaultRate      = 100.0
	// DefaultMaxSize is 4.7 GB, a DVD image's size.
	DefaultMaxSize = 4.7e9
)

// DefaultStart is the start of a stream without one.
var DefaultStart = time.Date(1998, 6, 1, 0, 0, 0, 0, time.UTC)

// withDefaults fills in the defaults and checks s.
func (s Synthetic) withDefaults() (Synthetic, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.Requests, DefaultRequests)
	def(&s.Objects, DefaultObjects)
	def(&s.Clients, DefaultClients)
	def(&s.Resolvers, DefaultResolvers)
	def(&s.Regions, 1)
	deff(&s.Alpha, 1)
	deff(&s.ResolverAlpha, 1)
	deff(&s.SizeMu, 9.357)
	deff(&s.SizeSigma, 1.318)
	deff(&s.TailShare, 0.07)
	deff(&s.TailAlpha, 1.1)
	deff(&s.TailMin, 133_000)
	deff(&s.MaxSize, DefaultMaxSize)
	deff(&s.Rate, DefaultRate)
	if s.Start.IsZero() {
		s.Start = DefaultStart
	}
	return s, s.check()
}

// check reports every field of a defaulted s out of its range.
func (s Synthetic) check() error {
	var errs []error
	for _, c := range []struct {
		name string
		v    int
	}{{"requests", s.Requests}, {"objects", s.Objects}, {"clients", s.Clients}, {"resolvers", s.Resolvers}, {"regions", s.Regions}} {
		if c.v < 0 || c.name != "requests" && c.v > math.MaxUint32 || c.name == "regions" && c.v > math.MaxUint16 {
			errs = append(errs, fmt.Errorf("%s: %d, want a positive number that fits the tables", c.name, c.v))
		}
	}
	for _, c := range []struct {
		name      string
		v, lo, hi float64 // lo < v ≤ hi
	}{{"alpha", s.Alpha, 0, 10}, {"resolver alpha", s.ResolverAlpha, 0, 10}, {"size sigma", s.SizeSigma, 0, 10},
		{"tail share", s.TailShare, 0, 1}, {"tail alpha", s.TailAlpha, 0, 10}, {"tail min", s.TailMin, 0, 1e12},
		{"max size", s.MaxSize, 0, 1 << 50},
		{"rate", s.Rate, 0, 1e9}} {
		if !(c.v > c.lo && c.v <= c.hi) {
			errs = append(errs, fmt.Errorf("%s: %g, want more than %g and at most %g", c.name, c.v, c.lo, c.hi))
		}
	}
	if !(s.Diurnal >= 0 && s.Diurnal <= 1) {
		errs = append(errs, fmt.Errorf("diurnal: %g, want 0..1", s.Diurnal))
	}
	if !(s.SizeMu >= 0 && s.SizeMu <= 30) {
		errs = append(errs, fmt.Errorf("size mu: %g, want 0..30 (ln bytes)", s.SizeMu))
	}
	return errors.Join(errs...)
}

// Population is who asks in a synthetic workload: each client's resolver
// and each resolver's region.
type Population struct {
	ClientResolver []uint32
	ResolverRegion []uint16
}

// Stream is a synthetic workload ready to be replayed: its object sizes,
// its population and its requests, made as they are read, so that a
// stream of any length takes the memory of its objects and clients only
// (about 16 bytes an object and 4 a client).
type Stream struct {
	s          Synthetic
	Sizes      []uint64 // by object
	Population Population
	popularity []float64 // running Zipf weights of the objects, normalised
	byResolver []float64 // of the resolvers
}

// New makes the stream s describes.
func (s Synthetic) New() (*Stream, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("workload: synthetic: %w", err)
	}
	rng := rand.New(rand.NewPCG(s.Seed, 0x5052474521)) // the objects' and the population's draw
	st := &Stream{s: s, popularity: zipfCDF(s.Objects, s.Alpha), byResolver: zipfCDF(s.Resolvers, s.ResolverAlpha)}
	st.Sizes = make([]uint64, s.Objects)
	for i := range st.Sizes {
		st.Sizes[i] = s.size(rng)
	}
	st.Population.ClientResolver = make([]uint32, s.Clients)
	for i := range st.Population.ClientResolver {
		st.Population.ClientResolver[i] = uint32(draw(st.byResolver, rng.Float64()))
	}
	st.Population.ResolverRegion = make([]uint16, s.Resolvers)
	for i := range st.Population.ResolverRegion {
		st.Population.ResolverRegion[i] = uint16(i % s.Regions)
	}
	return st, nil
}

// size draws one object's size in bytes, at least 1.
func (s Synthetic) size(rng *rand.Rand) uint64 {
	var x float64
	if rng.Float64() < s.TailShare {
		x = s.TailMin / math.Pow(1-rng.Float64(), 1/s.TailAlpha) // Pareto: P(X > x) = (TailMin/x)^α
	} else {
		x = math.Exp(s.SizeMu + s.SizeSigma*rng.NormFloat64())
	}
	return uint64(min(max(x, 1), s.MaxSize))
}

// zipfCDF returns the running sums of the weights 1/k^alpha of k = 1..n,
// normalised to end at 1.
func zipfCDF(n int, alpha float64) []float64 {
	cdf := make([]float64, n)
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(float64(k+1), -alpha)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	return cdf
}

// draw returns the index that u, in [0, 1), falls on in cdf.
func draw(cdf []float64, u float64) int {
	k, _ := slices.BinarySearch(cdf, u)
	for k < len(cdf)-1 && cdf[k] <= u {
		k++
	}
	return min(k, len(cdf)-1)
}

// Requests returns the stream's requests in time order: Poisson arrivals
// at the day's rate (by thinning), each of an object drawn by popularity
// and a client drawn uniformly, status 200 and the object's size.
// Every call gives the same requests.
func (st *Stream) Requests() iter.Seq[Request] {
	return func(yield func(Request) bool) {
		s := st.s
		rng := rand.New(rand.NewPCG(s.Seed, 0x7265717565737473)) // the requests' own draw
		peak := s.Rate * (1 + s.Diurnal)
		start := s.Start.UnixNano()
		t := 0.0 // seconds since Start
		for n := 0; n < s.Requests; {
			t += rng.ExpFloat64() / peak
			if s.Diurnal > 0 && rng.Float64()*peak > st.rateAt(t) {
				continue // thinned: the day's rate is below its peak now
			}
			obj := draw(st.popularity, rng.Float64())
			rq := Request{At: start + int64(t*1e9), Object: uint32(obj), Client: uint32(rng.IntN(s.Clients)),
				Size: st.Sizes[obj], Status: 200}
			n++
			if !yield(rq) {
				return
			}
		}
	}
}

// rateAt is the request rate t seconds after Start.
func (st *Stream) rateAt(t float64) float64 {
	h := float64(st.s.Start.Hour()) + float64(st.s.Start.Minute())/60 + t/3600
	return st.s.Rate * (1 + st.s.Diurnal*math.Sin(2*math.Pi*(h-9)/24))
}
