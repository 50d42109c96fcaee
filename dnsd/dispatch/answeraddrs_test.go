package dispatch

import (
	"net/netip"
	"slices"
	"testing"
)

// TestAnswerAddrs: an answer carries at most the group's answers
// addresses of a family, taken round robin over the picked members, so
// that a member with many addresses crowds out no other.
func TestAnswerAddrs(t *testing.T) {
	a := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	many := a("192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5", "192.0.2.6", "192.0.2.7", "192.0.2.8",
		"192.0.2.9", "192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13", "192.0.2.14", "192.0.2.15", "192.0.2.16")
	addrs := [][]netip.Addr{many, a("198.51.100.1"), a("203.0.113.1", "203.0.113.2")}
	tests := []struct {
		name   string
		picked []int
		n      int
		want   []netip.Addr
	}{
		{"one member of many addresses", []int{0}, 2, many[:2]},
		{"the big member first", []int{0, 1}, 2, a("192.0.2.1", "198.51.100.1")},
		{"round robin", []int{2, 0, 1}, 5, a("203.0.113.1", "192.0.2.1", "198.51.100.1", "203.0.113.2", "192.0.2.2")},
		{"fewer addresses than answers", []int{1, 2}, 8, a("198.51.100.1", "203.0.113.1", "203.0.113.2")},
		{"nothing picked", nil, 2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := answerAddrs(make([]netip.Addr, 0, 4), addrs, tc.picked, tc.n)
			if !slices.Equal(got, tc.want) {
				t.Errorf("answerAddrs(%v, %d) = %v, want %v", tc.picked, tc.n, got, tc.want)
			}
		})
	}
}
