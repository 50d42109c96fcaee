package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler/site"
)

// CacheOptions configure a Cache.
type CacheOptions struct {
	// Registerer, when not nil, gets the cache metrics
	// (transmirror_mirror_cache_*). A second Cache on the same registry
	// (after a reload) shares the first one's collectors.
	Registerer prometheus.Registerer
}

// Cache is the back end's memory cache in front of its document root: a
// least-recently-used cache bounded by bytes (site.LRUBytes, so that
// tb-ccrd's model of it evicts alike) of whole files no larger than
// max_object. A FileServer with a Cache (FileServerOptions.Cache) still
// opens and stats every file it serves, which is the revalidation: an
// entry is keyed by the name and is only a hit when the opened file has
// the entry's mtime and size, so a file replaced by renaming is never
// served stale. A hit is served from memory with http.ServeContent over a
// bytes.Reader, so Range, ETag and the preconditions behave as for a file.
//
// Every regular file response that is not served from memory counts as
// a miss, including files too large to cache. Concurrent misses of one
// file each read it; the last one's copy stays.
type Cache struct {
	maxObject int64
	missDelay time.Duration // per MiB
	disk      chan struct{} // the one simulated disk of the miss delay
	m         *cacheMetrics

	mu  sync.Mutex
	lru *site.LRUBytes[cacheEntry]
}

// cacheEntry is one cached file.
type cacheEntry struct {
	mtime int64 // UnixNano
	data  []byte
}

// NewCache returns a Cache of c.Memory bytes, or nil (no cache) when
// c.Memory is 0.
func NewCache(c frontend.CacheConfig, o CacheOptions) (*Cache, error) {
	if c.Memory <= 0 {
		return nil, nil
	}
	if c.MaxObject <= 0 {
		c.MaxObject = frontend.DefaultCacheMaxObject
	}
	m := newCacheMetrics()
	if o.Registerer != nil {
		var err error
		if m, err = probe.RegisterShared(o.Registerer, m); err != nil {
			return nil, fmt.Errorf("mirror: register cache metrics: %w", err)
		}
	}
	return &Cache{
		maxObject: int64(c.MaxObject),
		missDelay: c.MissDelayPerMiB.D(),
		disk:      make(chan struct{}, 1),
		m:         m,
		lru:       site.NewLRUBytes[cacheEntry](int64(c.Memory), 0),
	}, nil
}

// content returns what to serve for the open regular file f, named name,
// with info fi: the cached bytes on a hit; on a miss the file's bytes,
// now cached, or f itself when it is too large or cannot be read.
func (c *Cache) content(ctx context.Context, name string, f *os.File, fi fs.FileInfo) io.ReadSeeker {
	size, mtime := fi.Size(), fi.ModTime().UnixNano()
	if size <= c.maxObject {
		c.mu.Lock()
		e, ok := c.lru.Get(name)
		c.mu.Unlock()
		if ok && e.mtime == mtime && int64(len(e.data)) == size {
			c.m.hits.Inc()
			return bytes.NewReader(e.data)
		}
	}
	c.m.misses.Inc()
	c.delay(ctx, size)
	if size > c.maxObject {
		return servedFile{f}
	}
	data := make([]byte, size)
	// ReadAt leaves f's offset alone, so f can still be served on error.
	if n, err := f.ReadAt(data, 0); int64(n) != size || err != nil && !errors.Is(err, io.EOF) {
		return servedFile{f}
	}
	c.mu.Lock()
	c.lru.Add(name, cacheEntry{mtime: mtime, data: data}, size+int64(len(name)))
	c.m.bytes.Set(float64(c.lru.Bytes()))
	c.mu.Unlock()
	return bytes.NewReader(data)
}

// delay stands in for reading size bytes from a disk: it sleeps for the
// configured miss delay of size bytes, one miss at a time per Cache (a
// disk serves one request at a time, so misses queue for it), or until
// ctx is done.
func (c *Cache) delay(ctx context.Context, size int64) {
	if c.missDelay <= 0 || size <= 0 {
		return
	}
	select {
	case c.disk <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-c.disk }()
	d := time.Duration(float64(c.missDelay) * float64(size) / (1 << 20))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Len returns the number of cached files.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// cacheMetrics are the Cache's collectors, one Collector so that a reload
// can share them (see probe.RegisterShared).
type cacheMetrics struct {
	hits, misses prometheus.Counter
	bytes        prometheus.Gauge
}

func newCacheMetrics() *cacheMetrics {
	const ns, sub = "transmirror", "mirror"
	return &cacheMetrics{
		hits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "cache_hits_total",
			Help: "File responses served from the memory cache.",
		}),
		misses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "cache_misses_total",
			Help: "File responses not served from the memory cache (including files too large for it).",
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "cache_bytes",
			Help: "Bytes held by the memory cache.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (m *cacheMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.hits.Describe(ch)
	m.misses.Describe(ch)
	m.bytes.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *cacheMetrics) Collect(ch chan<- prometheus.Metric) {
	m.hits.Collect(ch)
	m.misses.Collect(ch)
	m.bytes.Collect(ch)
}

// CacheStatus describes a document root's memory cache.
type CacheStatus struct {
	// Objects is the number of cached files, Bytes their size with
	// their names, Capacity the bound (site.cache.memory) and MaxObject
	// the largest file cached (site.cache.max_object).
	Objects   int   `json:"objects"`
	Bytes     int64 `json:"bytes"`
	Capacity  int64 `json:"capacity"`
	MaxObject int64 `json:"max_object"`
	// Hits and Misses count the file responses served from memory and
	// not (since the start); HitRatio is Hits/(Hits+Misses), 0 before
	// the first.
	Hits     uint64  `json:"hits"`
	Misses   uint64  `json:"misses"`
	HitRatio float64 `json:"hit_ratio"`
}

// Status returns the cache's fill and its hit counts.
func (c *Cache) Status() CacheStatus {
	c.mu.Lock()
	s := CacheStatus{Objects: c.lru.Len(), Bytes: c.lru.Bytes(), Capacity: c.lru.Capacity(), MaxObject: c.maxObject}
	c.mu.Unlock()
	s.Hits, s.Misses = uint64(probe.MetricValue(c.m.hits)), uint64(probe.MetricValue(c.m.misses))
	if total := s.Hits + s.Misses; total > 0 {
		s.HitRatio = float64(s.Hits) / float64(total)
	}
	return s
}

// CacheStatus returns the status of the FileServer's memory cache, nil
// without one.
func (fs *FileServer) CacheStatus() *CacheStatus {
	if fs.cache == nil {
		return nil
	}
	cs := fs.cache.Status()
	return &cs
}
