package scheduler

import (
	"math/rand/v2"
	"testing"
)

// at is a location with coordinates.
func at(lat, lon float64, country, continent string) Location {
	return Location{Lat: lat, Lon: lon, HasCoords: true, Country: country, Continent: continent}
}

// regionMembers is the 3 regions × 2 members group, all up and idle.
func regionMembers() []Member {
	return []Member{
		{Name: "fra", Up: true, Capacity: 100, Weight: 1, Loc: at(50.1109, 8.6821, "DE", "EU")},
		{Name: "ams", Up: true, Capacity: 100, Weight: 1, Loc: at(52.3676, 4.9041, "NL", "EU")},
		{Name: "nyc", Up: true, Capacity: 100, Weight: 1, Loc: at(40.7128, -74.0060, "US", "NA")},
		{Name: "sfo", Up: true, Capacity: 100, Weight: 1, Loc: at(37.7749, -122.4194, "US", "NA")},
		{Name: "sin", Up: true, Capacity: 100, Weight: 1, Loc: at(1.3521, 103.8198, "SG", "AS")},
		{Name: "tyo", Up: true, Capacity: 100, Weight: 1, Loc: at(35.6762, 139.6503, "JP", "AS")},
	}
}

// regionOf returns the region of a member of regionMembers.
func regionOf(name string) string {
	switch name {
	case "fra", "ams":
		return "EU"
	case "nyc", "sfo":
		return "NA"
	case "sin", "tyo":
		return "AS"
	}
	return "?"
}

// regionClient is a client of the region tests with its home region and the
// region it should spill to when both home members are full: the region of
// the next nearest member for nearest, any region with a member in the next
// geo-load tier (within DefaultTierSlackKm of that member) for geo-load.
type regionClient struct {
	name        string
	loc         Location
	home, spill string
	spillTier   []string
}

func regionClients() []regionClient {
	return []regionClient{
		// nyc 5837 km, sfo 8953
		{"paris", at(48.8566, 2.3522, "FR", "EU"), "EU", "NA", []string{"NA"}},
		// nyc 6385 km, sfo 9105
		{"berlin", at(52.52, 13.405, "DE", "EU"), "EU", "NA", []string{"NA"}},
		// ams 6609 km, fra 6964, tyo 10141
		{"chicago", at(41.8781, -87.6298, "US", "NA"), "NA", "EU", []string{"EU"}},
		// tyo 8819 km, ams 8940, fra 9303: Tokyo and Europe are one tier
		{"los-angeles", at(34.0522, -118.2437, "US", "NA"), "NA", "AS", []string{"AS", "EU"}},
		// fra 8967 km, ams 9174, nyc 13932
		{"bangkok", at(13.7563, 100.5018, "TH", "AS"), "AS", "EU", []string{"EU"}},
		// fra 8550 km, ams 8556, sfo 9029: Europe and San Francisco are one tier
		{"seoul", at(37.5665, 126.978, "KR", "AS"), "AS", "EU", []string{"EU", "NA"}},
	}
}

// newRand returns a deterministic generator.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5eed)) }

// mustPolicy builds a policy or fails the test.
func mustPolicy(t testing.TB, name string, p Params) Policy {
	t.Helper()
	pol, err := New(name, p)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	return pol
}

// names maps indexes to member names.
func names(g *Group, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = g.Member(i).Name
	}
	return out
}
