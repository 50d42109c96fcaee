package scheduler

import (
	"net/netip"
)

// ScopeKey returns a stable 64-bit hash of a client scope for Client.Key:
// the same prefix gives the same key in every process and release, so the
// hash policy keeps a scope on its member across restarts and replicas.
func ScopeKey(scope netip.Prefix) uint64 {
	scope = scope.Masked()
	a := scope.Addr().As16()
	h := uint64(14695981039346656037)
	for _, b := range a {
		h ^= uint64(b)
		h *= 1099511628211
	}
	h ^= uint64(scope.Bits()+1) | boolBit(scope.Addr().Is4())<<8
	h *= 1099511628211
	return mix64(h)
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
