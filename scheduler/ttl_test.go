package scheduler

import (
	"math"
	"testing"
)

func TestTTLBoundsAndMonotone(t *testing.T) {
	cases := []struct {
		name           string
		minTTL, maxTTL uint32
	}{
		{"typical", 20, 300},
		{"equal", 60, 60},
		{"zero-min", 0, 3600},
		{"swapped", 300, 20},
		{"one-second", 1, 1},
		{"huge", 5, math.MaxUint32},
	}
	shares := []float64{math.NaN(), math.Inf(-1), -1, 0}
	for s := 0.0; s <= 1; s += 0.0005 {
		shares = append(shares, s)
	}
	shares = append(shares, 1, 2, math.Inf(1))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := min(tc.minTTL, tc.maxTTL), max(tc.minTTL, tc.maxTTL)
			prev := uint32(math.MaxUint32)
			for _, s := range shares {
				got := TTL(s, tc.minTTL, tc.maxTTL)
				if got < lo || got > hi {
					t.Fatalf("TTL(%g) = %d, outside [%d, %d]", s, got, lo, hi)
				}
				if got > prev {
					t.Fatalf("TTL(%g) = %d > %d for a smaller share", s, got, prev)
				}
				prev = got
			}
			if got := TTL(0, tc.minTTL, tc.maxTTL); got != hi {
				t.Errorf("TTL(0) = %d, want max %d", got, hi)
			}
		})
	}
}

func TestTTLValues(t *testing.T) {
	cases := []struct {
		name string
		x    float64 // the scope's rate in fair shares of one member
		want uint32
	}{
		{"quiet", 0, 300},
		{"nan-is-quiet", math.NaN(), 300},
		{"half-at-scale", TTLRateScale, 150},
		{"third-at-twice-scale", 2 * TTLRateScale, 100},
		{"2.6%-of-4-members", 0.026 * 4, 147},
		{"a-member's-fair-share", 1, 27},
		{"clamped-to-min", 2, 20},
		{"everything-of-4", 4, 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := TTL(tc.x, 20, 300); got != tc.want {
				t.Errorf("TTL(%g, 20, 300) = %d, want %d", tc.x, got, tc.want)
			}
		})
	}
}

func TestHiddenLoad(t *testing.T) {
	cases := []struct {
		name string
		rate float64
		want float64
	}{
		{"zero", 0, 0},
		{"one-request-per-second", 1, 10},
		{"fractional", 0.25, 2.5},
		{"negative", -1, 0},
		{"nan", math.NaN(), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := HiddenLoad(tc.rate); got != tc.want {
				t.Errorf("HiddenLoad(%g) = %g, want %g", tc.rate, got, tc.want)
			}
		})
	}
}

func TestAnswerRate(t *testing.T) {
	cases := []struct {
		name                 string
		scopeRate, copies, w float64
	}{
		{"quiet scope: its own rate", 0.25, 0.1, 0.25},
		{"one copy: its whole rate", 40, 1, 40},
		{"four copies: a quarter each", 40, 4, 10},
		{"copies unknown: its whole rate", 40, 0, 40},
		{"NaN copies: its whole rate", 40, math.NaN(), 40},
		{"NaN: 0", math.NaN(), 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AnswerRate(tc.scopeRate, tc.copies); math.Abs(got-tc.w) > 1e-9 {
				t.Errorf("AnswerRate(%v, %v) = %v, want %v", tc.scopeRate, tc.copies, got, tc.w)
			}
		})
	}
}
