package scheduler

import "math"

// Location is where a client or a member is: coordinates when known, and
// country (ISO 3166-1 alpha-2) and continent (two-letter code) when known.
type Location struct {
	Lat, Lon  float64
	HasCoords bool
	Country   string
	Continent string
}

// Known reports whether the location says anything at all.
func (l Location) Known() bool { return l.HasCoords || l.Country != "" || l.Continent != "" }

// earthRadiusKm is the mean Earth radius used for great-circle distances.
const earthRadiusKm = 6371.0088

// DistanceKm is the great-circle (haversine) distance between a and b in
// kilometres. When either side lacks coordinates it falls back to a coarse
// distance: 0 for the same country, 2,000 km for the same continent,
// 10,000 km otherwise, and 20,000 km (half the circumference) when nothing
// is known.
func DistanceKm(a, b Location) float64 {
	if a.HasCoords && b.HasCoords {
		const rad = math.Pi / 180
		φ1, φ2 := a.Lat*rad, b.Lat*rad
		dφ, dλ := (b.Lat-a.Lat)*rad, (b.Lon-a.Lon)*rad
		h := math.Sin(dφ/2)*math.Sin(dφ/2) + math.Cos(φ1)*math.Cos(φ2)*math.Sin(dλ/2)*math.Sin(dλ/2)
		return 2 * earthRadiusKm * math.Asin(math.Min(1, math.Sqrt(h)))
	}
	switch {
	case a.Country != "" && a.Country == b.Country:
		return 0
	case a.Continent != "" && a.Continent == b.Continent:
		return 2000
	case a.Known() && b.Known():
		return 10000
	}
	return 20000
}
