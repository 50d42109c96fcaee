package globalsim

import "github.com/transmirror/transmirror/scheduler/sim/workload"

// SkewedWorld is clients behind resolvers in one region, resolver 0 with
// the share heavy of them and the others an equal share each of the
// rest: the TTL-skew scenario, where a workload that draws its clients
// evenly sends resolver 0 that share of the requests.
func SkewedWorld(clients, resolvers int, heavy float64) World {
	w := World{ClientResolver: make([]uint32, clients), ResolverRegion: make([]uint16, resolvers)}
	nh := int(heavy * float64(clients))
	for c := range w.ClientResolver {
		if c >= nh && resolvers > 1 {
			w.ClientResolver[c] = 1 + uint32((c-nh)%(resolvers-1))
		}
	}
	return w
}

// WorldOf is a synthetic workload's population as a World; the first
// public of its resolvers (the largest, as the population draws them)
// are public resolvers, whose clients are in every region in turn.
func WorldOf(p workload.Population, regions, public int) World {
	w := World{ClientResolver: p.ClientResolver, ResolverRegion: p.ResolverRegion}
	if public <= 0 {
		return w
	}
	w.ClientRegion = make([]uint16, len(p.ClientResolver))
	for c, r := range p.ClientResolver {
		w.ClientRegion[c] = p.ResolverRegion[r]
		if int(r) < public {
			w.ClientRegion[c] = uint16(c % regions)
		}
	}
	return w
}
