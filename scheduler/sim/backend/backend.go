// Package backend is the simulator's model of a site's back end: a CPU
// and a disk, each serving one request at a time in the order they come,
// with the costs of the LARD paper's simulator by default, and in front
// of the disk the memory cache the back ends run (scheduler/site's
// LRUBytes, bounded by bytes, whole objects up to a largest size), so
// that the model and the back ends evict alike. Time is virtual: every
// figure is nanoseconds on the simulation's clock, given by the caller.
package backend

import (
	"errors"
	"time"

	"github.com/transmirror/transmirror/scheduler/site"
)

// Costs are what serving a request costs a back end.
type Costs struct {
	// PerRequest and PerKiB are CPU time: per request (setting up and
	// tearing down its connection, reading it) and per KiB of response
	// sent.
	PerRequest, PerKiB time.Duration
	// Seek and DiskPerKiB are disk time, of a request the cache misses:
	// to find the file, and per KiB read.
	Seek, DiskPerKiB time.Duration
}

// LARDCosts are the costs of the LARD paper's simulator (Pai et al.,
// "Locality-Aware Request Distribution in Cluster-based Network
// Servers", ASPLOS 1998): 145 µs of CPU to set up and tear down a
// connection and 40 µs per 512 bytes sent; 28 ms of disk seek and
// rotation per file read and 410 µs per 4 KB.
var LARDCosts = Costs{
	PerRequest: 145 * time.Microsecond,
	PerKiB:     80 * time.Microsecond,
	Seek:       28 * time.Millisecond,
	DiskPerKiB: 102500 * time.Nanosecond,
}

// Config describes one back end.
type Config struct {
	// Memory is the cache's size in bytes (0: no cache), MaxObject the
	// largest object it keeps (0: Memory).
	Memory, MaxObject int64
	// Costs are the back end's costs (LARDCosts when zero).
	Costs Costs
}

// Backend is one simulated back end. It is not safe for concurrent use.
type Backend struct {
	costs             Costs
	maxObject         int64
	cache             *site.LRUBytes[struct{}]
	cpuFree, diskFree int64 // when the CPU and the disk are next free
	served, hits      int64
	bytes, hitBytes   int64
	cpuBusy, diskBusy int64 // service time given, ns
}

// New returns an idle back end with an empty cache.
func New(c Config) (*Backend, error) {
	if c.Memory < 0 || c.MaxObject < 0 {
		return nil, errors.New("backend: memory and max object must not be negative")
	}
	if c.Costs == (Costs{}) {
		c.Costs = LARDCosts
	}
	if c.Costs.PerRequest < 0 || c.Costs.PerKiB < 0 || c.Costs.Seek < 0 || c.Costs.DiskPerKiB < 0 {
		return nil, errors.New("backend: costs must not be negative")
	}
	if c.MaxObject == 0 || c.MaxObject > c.Memory {
		c.MaxObject = c.Memory
	}
	return &Backend{costs: c.Costs, maxObject: c.MaxObject, cache: site.NewLRUBytes[struct{}](c.Memory, 0)}, nil
}

// Serve serves a request for the object key of size bytes arriving at
// at: on a miss the disk reads it (after the requests before it), then
// the CPU sends it; an object no larger than MaxObject is cached once
// read. It returns when the response is sent and whether it was a hit.
func (b *Backend) Serve(at int64, key string, size int64) (done int64, hit bool) {
	size = max(size, 0)
	ready := at
	if _, hit = b.cache.Get(key); !hit {
		start := max(at, b.diskFree)
		d := int64(b.costs.Seek) + perKiB(b.costs.DiskPerKiB, size)
		b.diskFree, b.diskBusy = start+d, b.diskBusy+d
		ready = b.diskFree
		if size <= b.maxObject {
			b.cache.Add(key, struct{}{}, size)
		}
	}
	start := max(ready, b.cpuFree)
	c := int64(b.costs.PerRequest) + perKiB(b.costs.PerKiB, size)
	b.cpuFree, b.cpuBusy = start+c, b.cpuBusy+c
	b.account(size, hit)
	return b.cpuFree, hit
}

// perKiB is the cost of size bytes at cost per KiB, in nanoseconds.
func perKiB(cost time.Duration, size int64) int64 {
	return int64(float64(cost) * float64(size) / 1024)
}

func (b *Backend) account(size int64, hit bool) {
	b.served++
	b.bytes += size
	if hit {
		b.hits++
		b.hitBytes += size
	}
}

// Stats are a back end's counts: requests served and those the cache
// hit, their bytes, the bytes the cache holds, and the time its CPU and
// its disk spent serving (nanoseconds).
type Stats struct {
	Requests, Hits, Bytes, HitBytes int64
	CachedBytes                     int64
	CPUBusy, DiskBusy               int64
}

// Stats returns what b served so far.
func (b *Backend) Stats() Stats {
	return Stats{Requests: b.served, Hits: b.hits, Bytes: b.bytes, HitBytes: b.hitBytes, CachedBytes: b.cache.Bytes(),
		CPUBusy: b.cpuBusy, DiskBusy: b.diskBusy}
}
