package yamlconf

import (
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
