package site

import (
	"math"
	"time"
)

// FNV-1a, 64 bits: stable across processes and releases, unlike
// hash/maphash, so that assignments survive a restart of the front end.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// hashString continues the FNV-1a hash h over s.
func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// hashBytes continues the FNV-1a hash h over b.
func hashBytes(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

// mix64 is MurmurHash3's finalizer: it spreads FNV's weak low bits over
// the whole word.
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// rendezvous returns the up back end with the highest random weight for a
// key whose FNV-1a hash is keyHash: score = w / −ln(u), u uniform in (0,1)
// from the hash of (key, name). A back end wins with probability
// w/Σw, and removing one only moves the keys it had won. -1 when none is up.
func rendezvous(keyHash uint64, bs []Backend, has []bool) int {
	best, bestScore := -1, 0.0
	for i := range bs {
		if !serves(bs, has, i) {
			continue
		}
		h := mix64(hashString(keyHash^0xff, bs[i].Name))
		u := (float64(h>>11) + 0.5) / (1 << 53) // in (0,1)
		s := weight(&bs[i]) / -math.Log(u)
		if best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// clientHash is the client-hash policy; see [ClientHash]. It has no
// mutable state.
type clientHash struct {
	v4, v6 int
}

var _ Policy = (*clientHash)(nil)

func (c *clientHash) Name() string { return ClientHash }

func (c *clientHash) Pick(req Request, bs []Backend, _ time.Time) (int, error) {
	a := req.Client.Unmap()
	if a.IsValid() {
		bits := c.v6
		if a.Is4() {
			bits = c.v4
		}
		if p, err := a.Prefix(bits); err == nil {
			a = p.Addr()
		}
	}
	b := a.As16() // the zero Addr gives all zeros: one back end for all of them
	i := rendezvous(hashBytes(fnvOffset, b[:]), bs, req.Has)
	if i < 0 {
		return -1, ErrNoBackend
	}
	return i, nil
}

func (c *clientHash) Done(Request, string, time.Time) {}
