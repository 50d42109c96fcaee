package yamlconf

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		text string
		want time.Duration
		ok   bool
	}{
		{"10s", 10 * time.Second, true},
		{"1m30s", 90 * time.Second, true},
		{"0", 0, true},
		{"-1s", -time.Second, true},
		{"10", 0, false},
		{"5 parsecs", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			var d Duration
			err := d.UnmarshalText([]byte(tt.text))
			if (err == nil) != tt.ok || d.D() != tt.want {
				t.Fatalf("UnmarshalText(%q) = %v, %v", tt.text, d.D(), err)
			}
			if !tt.ok {
				return
			}
			b, _ := d.MarshalText()
			var back Duration
			if err := back.UnmarshalText(b); err != nil || back != d {
				t.Errorf("round trip %q → %v, %v", b, back.D(), err)
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		text string
		want ByteSize
		ok   bool
	}{
		{"1048576", 1 << 20, true},
		{"512KiB", 512 << 10, true},
		{"8GiB", 8 << 30, true},
		{"2 GB", 2e9, true},
		{"3kB", 3000, true},
		{"7B", 7, true},
		{"1TiB", 1 << 40, true},
		{"-1", 0, false},
		{"8 gigs", 0, false},
		{"9999999TiB", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			var n ByteSize
			err := n.UnmarshalText([]byte(tt.text))
			if (err == nil) != tt.ok || n != tt.want {
				t.Errorf("UnmarshalText(%q) = %d, %v", tt.text, n, err)
			}
		})
	}
}

func TestBandwidth(t *testing.T) {
	tests := []struct {
		text string
		want Bandwidth // bytes per second
		ok   bool
	}{
		{"125000000", 125e6, true},
		{"0", 0, true},
		{"1Gbit/s", 125e6, true},
		{"1 Gbit/s", 125e6, true},
		{"2.5Gbit/s", 312.5e6, true},
		{"100Mbit/s", 12.5e6, true},
		{"10kbit/s", 1250, true},
		{"10Kbit/s", 1250, true},
		{"1Tbit/s", 125e9, true},
		{"8000bit/s", 1000, true},
		{"1Gbps", 125e6, true},
		{"100Mbps", 12.5e6, true},
		{"8000bps", 1000, true},
		{"12.5MB/s", 12.5e6, true},
		{"100MB/s", 100e6, true},
		{"1GB/s", 1e9, true},
		{"3kB/s", 3000, true},
		{"3KB/s", 3000, true},
		{"1TB/s", 1e12, true},
		{"100MiB/s", 100 << 20, true},
		{"1KiB/s", 1 << 10, true},
		{"1GiB/s", 1 << 30, true},
		{"1TiB/s", 1 << 40, true},
		{"7B/s", 7, true},
		{"1PB/s", 0, false},
		{"1000TB/s", 1e15, true},
		{"1001TB/s", 0, false},
		{"-1Gbit/s", 0, false},
		{"+1Gbit/s", 0, false},
		{"1e9", 0, false},
		{"inf", 0, false},
		{"NaN", 0, false},
		{"0x10", 0, false},
		{"1.2.3MB/s", 0, false},
		{".", 0, false},
		{"Gbit/s", 0, false},
		{"1 Gigabit", 0, false},
		{"1Gb/s", 0, false},
		{"1gbit/s", 0, false},
		{"1MBps", 0, false},
		{"1GB", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			var b Bandwidth
			err := b.UnmarshalText([]byte(tt.text))
			if (err == nil) != tt.ok || b != tt.want {
				t.Fatalf("UnmarshalText(%q) = %v B/s, %v", tt.text, float64(b), err)
			}
			if !tt.ok {
				return
			}
			text, _ := b.MarshalText()
			var back Bandwidth
			if err := back.UnmarshalText(text); err != nil || back != b {
				t.Errorf("round trip %q → %v B/s, %v", text, float64(back), err)
			}
		})
	}
}

func TestBandwidthString(t *testing.T) {
	tests := []struct {
		b    Bandwidth
		want string
	}{
		{0, "0"},
		{125e6, "1Gbit/s"},
		{12.5e6, "100Mbit/s"},
		{312.5e6, "2.5Gbit/s"},
		{1000, "8kbit/s"},
		{100, "800bit/s"},
		{125e12, "1000Tbit/s"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.b.String(); got != tt.want {
				t.Errorf("String(%v B/s) = %q, want %q", float64(tt.b), got, tt.want)
			}
		})
	}
}

func TestBandwidthCheck(t *testing.T) {
	tests := []struct {
		name string
		b    Bandwidth
		want string // "" for no error
	}{
		{"no limit", 0, ""},
		{"1Gbit/s", 125e6, ""},
		{"the minimum", MinBandwidth, ""},
		{"the maximum", MaxBandwidth, ""},
		{"a number without its unit", 100, "100 B/s is below 1000 B/s (8kbit/s): write the unit"},
		{"negative", -1, "-1 B/s: want 0 (no limit) or a positive rate"},
		{"NaN", Bandwidth(math.NaN()), "NaN B/s: want 0"},
		{"infinite", Bandwidth(math.Inf(1)), "+Inf B/s: want 0"},
		{"too large", 2 * MaxBandwidth, "2e+15 B/s is above 1e+15 B/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.b.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check(%v) = %v", float64(tt.b), err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check(%v) = %v, want %q", float64(tt.b), err, tt.want)
			}
		})
	}
}
