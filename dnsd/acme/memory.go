package acme

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Memory is the Store of a single node: a map, lost on restart.
type Memory struct {
	mu sync.Mutex
	m  map[string]Challenge
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{m: map[string]Challenge{}} }

// Put keeps c.
func (s *Memory) Put(c Challenge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[c.Key()] = c
	return nil
}

// Delete drops c's Key.
func (s *Memory) Delete(c Challenge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c.Key())
	return nil
}

// List returns every challenge kept.
func (s *Memory) List() []Challenge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.m))
}

// bucket is a member's token bucket: RequestBurst requests, one more
// every RequestEvery.
type bucket struct {
	tokens float64
	at     time.Time
}

// take refills the bucket to now and takes a token if there is one.
func (k *bucket) take(now time.Time) bool {
	k.refill(now)
	if k.tokens < 1 {
		return false
	}
	k.tokens--
	return true
}

func (k *bucket) refill(now time.Time) {
	if d := now.Sub(k.at); d > 0 {
		k.tokens = min(RequestBurst, k.tokens+float64(d)/float64(RequestEvery))
	}
	k.at = now
}

// full reports whether the bucket is full at now (forgetting it changes
// nothing).
func (k *bucket) full(now time.Time) bool {
	k.refill(now)
	return k.tokens >= RequestBurst
}

// allow takes a token of key's bucket at now.
func (b *Book) allow(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.buckets[key]
	if k == nil {
		k = &bucket{tokens: RequestBurst, at: now}
		b.buckets[key] = k
	}
	return k.take(now)
}
