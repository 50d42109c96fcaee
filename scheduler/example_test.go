package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/transmirror/transmirror/scheduler"
)

// Example shows dnsd's per-query path: adaptive TTL from the scope's
// share, a pick, and the answer's hidden load booked as pending load.
func Example() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	group := scheduler.NewGroup([]scheduler.Member{
		{Name: "fra", Up: true, Capacity: 1000, Weight: 1,
			Loc: scheduler.Location{Lat: 50.11, Lon: 8.68, HasCoords: true, Country: "DE", Continent: "EU"}},
		{Name: "nyc", Up: true, Capacity: 1000, Weight: 1,
			Loc: scheduler.Location{Lat: 40.71, Lon: -74.01, HasCoords: true, Country: "US", Continent: "NA"}},
	})
	policy, err := scheduler.New("geo-load", scheduler.Params{LowWatermark: 0.7, HighWatermark: 0.9})
	if err != nil {
		panic(err)
	}
	est := scheduler.NewWindowEstimator(5 * time.Minute)
	est.ReportWindow(0, scheduler.Usage{Load: 300}, now, 10*time.Second) // fra: 30% utilized
	rates := scheduler.NewScopeRates(scheduler.ScopeRatesConfig{})
	rng := rand.New(rand.NewPCG(1, 2))

	scope := netip.MustParsePrefix("192.0.2.0/24")
	idx, failOpen := policy.Pick(group, scheduler.Query{
		Client: scheduler.Client{
			Loc: scheduler.Location{Lat: 48.86, Lon: 2.35, HasCoords: true, Country: "FR", Continent: "EU"},
			Key: scheduler.ScopeKey(scope),
		},
		N: 1, Rand: rng, Now: now, Load: est,
	}, make([]int, 0, 2))
	// The TTL from what is known before this answer (an unseen scope gets
	// ttl.unseen), and the answer recorded, in one call.
	a := rates.Answer(scope, scheduler.ScopeAnswer{
		Members: 1 << idx[0], N: len(idx), Min: 20, Max: 300, Unseen: 20, Fair: group.Len(),
	}, now)
	// The answer's load is booked until the member's reports show it; a
	// previous answer's (none here) leaves its members.
	est.Move(idx, nil, a.PrevN, scheduler.HiddenLoad(scheduler.AnswerRate(a.Rate, a.Copies)), a.PrevEnd, now)

	fmt.Println(group.Member(idx[0]).Name, a.TTL, failOpen)
	fmt.Printf("pending %.2f load units\n", est.Pending(idx[0], now))
	// Output:
	// fra 20 false
	// pending 10.00 load units
}
