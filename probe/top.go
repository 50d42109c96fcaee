package probe

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

const (
	// MaxTopPaths bounds the paths of a report's Top and of a group's.
	MaxTopPaths = 16
	// MaxTopPathLen bounds a path of a report's Top, in bytes.
	MaxTopPathLen = 512
	// MaxTopCount bounds a count of a report's Top.
	MaxTopCount = 1e15
)

// PathCount is one path of a Top list and its requests: a count over the
// sketch's window (mirror/popular: decayed, halved every 5 minutes).
type PathCount struct {
	Path  string  `json:"path"`
	Count float64 `json:"count"`
}

// CheckTopPath returns an error unless p is a path as a Top list carries
// it: 1 to MaxTopPathLen bytes, starting with '/', printable ASCII
// without space, '"', '\\', '<', '>' or '&' (a canonical escaped URL path
// with '&' as %26, mirror/popular's Key), so that its JSON is no longer
// than itself and its quotes.
func CheckTopPath(p string) error {
	switch {
	case p == "" || p[0] != '/':
		return errors.New("want a path starting with /")
	case len(p) > MaxTopPathLen:
		return fmt.Errorf("path longer than %d bytes", MaxTopPathLen)
	}
	for i := range len(p) {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return fmt.Errorf("path %.40q: byte %#02x: want escaped printable ASCII", p, c)
		}
	}
	return nil
}

// checkTop checks a report's Top: at most MaxTopPaths distinct paths that
// pass CheckTopPath, counts finite in [0, MaxTopCount].
func checkTop(top []PathCount) error {
	if len(top) > MaxTopPaths {
		return fmt.Errorf("%d paths, want at most %d", len(top), MaxTopPaths)
	}
	seen := make(map[string]bool, len(top))
	for i, pc := range top {
		if err := CheckTopPath(pc.Path); err != nil {
			return fmt.Errorf("%d: %w", i, err)
		}
		if seen[pc.Path] {
			return fmt.Errorf("%d: path %q twice", i, pc.Path)
		}
		seen[pc.Path] = true
		if !(pc.Count >= 0 && pc.Count <= MaxTopCount) {
			return fmt.Errorf("%d: count %g: want a finite number in [0, %g]", i, pc.Count, float64(MaxTopCount))
		}
	}
	return nil
}

// checkTopShape reads a report's top value from dec: an array of objects,
// each with the keys "path" and "count" exactly once (spelled exactly:
// encoding/json would match any case, and take the last of two) and
// scalar non-null values.
func checkTopShape(dec *json.Decoder) error {
	if tok, err := dec.Token(); err != nil {
		return err
	} else if d, ok := tok.(json.Delim); !ok || d != '[' {
		return errors.New("not an array")
	}
	for i := 0; dec.More(); i++ {
		if err := checkTopEntry(dec); err != nil {
			return fmt.Errorf("%d: %w", i, err)
		}
	}
	_, err := dec.Token() // the closing ']'
	return err
}

// checkTopEntry reads one object of a top array from dec.
func checkTopEntry(dec *json.Decoder) error {
	if tok, err := dec.Token(); err != nil {
		return err
	} else if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not an object")
	}
	var path, count bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch key, _ := tok.(string); {
		case key == "path" && !path:
			path = true
		case key == "count" && !count:
			count = true
		case key == "path" || key == "count":
			return fmt.Errorf("duplicate field %q", key)
		default:
			return fmt.Errorf("unknown field %q", key)
		}
		v, err := dec.Token()
		if err != nil {
			return err
		}
		switch v.(type) {
		case json.Delim, nil:
			return errors.New("a field is not a scalar")
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return err
	}
	if !path || !count {
		return errors.New(`want the fields "path" and "count"`)
	}
	return nil
}

// MergeTop returns the n paths (at most MaxTopPaths when n <= 0) of the
// lists with the largest sums of counts, by sum then path: a group's top
// from its members' (each count over its own member's sketch, so the sum
// is about the group's requests of the same recent minutes).
func MergeTop(n int, lists ...[]PathCount) []PathCount {
	if n <= 0 {
		n = MaxTopPaths
	}
	sum := make(map[string]float64)
	for _, l := range lists {
		for _, pc := range l {
			sum[pc.Path] += pc.Count
		}
	}
	out := make([]PathCount, 0, len(sum))
	for p, c := range sum {
		if c > 0 && !math.IsInf(c, 0) {
			out = append(out, PathCount{Path: p, Count: c})
		}
	}
	slices.SortFunc(out, func(a, b PathCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Path, b.Path)
	})
	return out[:min(n, len(out))]
}
