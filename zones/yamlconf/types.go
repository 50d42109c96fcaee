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

// Bandwidth is a rate in bytes per second, written in YAML with a unit of
// bits or bytes per second: 1Gbit/s, 100Mbit/s, 2.5Gbps, 12.5MB/s,
// 100MiB/s. Bit units are bit/s or bps with the decimal prefixes k (or K),
// M, G and T; byte units are B/s with the decimal prefixes kB (or KB), MB,
// GB, TB or the binary ones KiB, MiB, GiB, TiB. A plain number is bytes
// per second; 0 means no limit. Fractions are allowed ("2.5Gbit/s"),
// signs and exponents are not.
type Bandwidth float64

// Bounds of a Bandwidth other than 0: one below MinBandwidth is almost
// surely a number written without its unit (100 meaning 100Mbit/s), one
// above MaxBandwidth is no uplink.
const (
	MinBandwidth Bandwidth = 1e3  // 1kB/s, 8kbit/s
	MaxBandwidth Bandwidth = 1e15 // 1PB/s
)

// bandwidthUnits are the units a Bandwidth may be written in, in bytes
// per second; the prefixed ones come first, so that "MB/s" is not read as
// "B/s".
var bandwidthUnits = []struct {
	suffix string
	mult   float64
}{
	{"kbit/s", 1e3 / 8}, {"Kbit/s", 1e3 / 8}, {"Mbit/s", 1e6 / 8}, {"Gbit/s", 1e9 / 8}, {"Tbit/s", 1e12 / 8},
	{"kbps", 1e3 / 8}, {"Kbps", 1e3 / 8}, {"Mbps", 1e6 / 8}, {"Gbps", 1e9 / 8}, {"Tbps", 1e12 / 8},
	{"KiB/s", 1 << 10}, {"MiB/s", 1 << 20}, {"GiB/s", 1 << 30}, {"TiB/s", 1 << 40},
	{"kB/s", 1e3}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12},
	{"bit/s", 1.0 / 8}, {"bps", 1.0 / 8}, {"B/s", 1},
}

// UnmarshalText parses a non-negative rate with an optional unit (none:
// bytes per second), at most MaxBandwidth.
func (b *Bandwidth) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	num, mult := s, 1.0
	for _, u := range bandwidthUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !plainDecimal(num) || v*mult > float64(MaxBandwidth) {
		return fmt.Errorf("invalid bandwidth %q: want %s", text, bandwidthHint)
	}
	*b = Bandwidth(v * mult)
	return nil
}

// plainDecimal reports whether s is digits with at most one decimal point
// and at least one digit: no sign, exponent, hexadecimal, Inf or NaN.
func plainDecimal(s string) bool {
	digits, points := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			points++
		default:
			return false
		}
	}
	return digits > 0 && points <= 1
}

// MarshalText writes the rate in bits per second with the largest decimal
// prefix that keeps the number at least 1 ("1Gbit/s", "100Mbit/s"), or
// "0"; UnmarshalText reads it back.
func (b Bandwidth) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// String is the text MarshalText writes.
func (b Bandwidth) String() string {
	bits := float64(b) * 8
	if !(bits > 0) || math.IsInf(bits, 0) {
		return strconv.FormatFloat(float64(b), 'f', -1, 64)
	}
	unit := "bit/s"
	for _, u := range []struct {
		prefix string
		mult   float64
	}{{"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
		if bits >= u.mult {
			bits, unit = bits/u.mult, u.prefix+unit
			break
		}
	}
	return strconv.FormatFloat(bits, 'f', -1, 64) + unit
}

// BytesPerSecond returns b as a number of bytes per second.
func (b Bandwidth) BytesPerSecond() float64 { return float64(b) }

// Check returns an error unless b is a usable bandwidth: 0 (no limit), or
// a finite rate between MinBandwidth and MaxBandwidth. It is for values
// that did not come through UnmarshalText (an API's JSON), and for the
// lower bound, which UnmarshalText does not apply. The error says what is
// wrong with the value without naming it ("100 B/s is below ..."), for
// the caller to prefix with the key.
func (b Bandwidth) Check() error {
	v := float64(b)
	switch {
	case v == 0:
		return nil
	case !(v > 0) || math.IsInf(v, 0):
		return fmt.Errorf("%g B/s: want 0 (no limit) or a positive rate", v)
	case b < MinBandwidth:
		return fmt.Errorf("%g B/s is below %g B/s (%s): write the unit, e.g. 100Mbit/s (0: no limit)", v, float64(MinBandwidth), MinBandwidth)
	case b > MaxBandwidth:
		return fmt.Errorf("%g B/s is above %g B/s", v, float64(MaxBandwidth))
	}
	return nil
}

// Hints of the scalar types, shown after "invalid TYPE "text": want".
const (
	durationHint  = "e.g. 10s or 1m30s"
	sizeHint      = "e.g. 1048576, 512MiB or 8GiB"
	bandwidthHint = "e.g. 1Gbit/s, 100Mbit/s or 12.5MB/s"
	prefixHint    = "e.g. 192.0.2.0/24 or 2001:db8::/32"
)
