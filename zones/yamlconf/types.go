package yamlconf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as "10s", "1m30s" in YAML.
type Duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q: want %s", b, durationHint)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// ByteSize is a number of bytes written as 1048576, 512KiB, 8GiB or 2GB in
// YAML (binary units KiB MiB GiB TiB, decimal units kB MB GB TB).
type ByteSize int64

// sizeUnits are the units a ByteSize may be written in; the longer
// suffixes come first, so that "MiB" is not read as "B".
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// UnmarshalText parses a non-negative size with an optional unit.
func (n *ByteSize) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	num, mult := s, int64(1)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > math.MaxInt64/mult {
		return fmt.Errorf("invalid size %q: want %s", b, sizeHint)
	}
	*n = ByteSize(v * mult)
	return nil
}

// Hints of the scalar types, shown after "invalid TYPE "text": want".
const (
	durationHint = "e.g. 10s or 1m30s"
	sizeHint     = "e.g. 1048576, 512MiB or 8GiB"
	prefixHint   = "e.g. 192.0.2.0/24 or 2001:db8::/32"
)
