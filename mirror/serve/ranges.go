package serve

import (
	"slices"
	"strconv"
	"strings"
)

// byteRange is an inclusive byte range [start, end] of a file.
type byteRange struct{ start, end int64 }

// LimitRanges rewrites the Range header h of a GET for a file of size
// bytes before http.ServeContent serves it, which would otherwise send
// every range as asked, overlapping ones again and again (8,000 ranges
// over a 2 MB file: a 2.75 MB reply for 30 times the CPU of the file):
//
//   - with more than maxRanges ranges (maxRanges < 1: any), the result is "": the
//     Range is dropped and the whole file is served with 200, as nginx
//     does above its max_ranges;
//   - otherwise the satisfiable ranges are sorted and those that overlap
//     or touch are merged into one ("bytes=0-99,50-149,150-199" is
//     "bytes=0-199"), which RFC 9110 (14.2) allows;
//   - a header that is not "bytes=" ranges, that has a range that does
//     not parse, or none that is satisfiable is left as it is, for
//     ServeContent to ignore or answer with 416.
//
// Only the Range header changes: If-Range is evaluated by ServeContent as
// before, and drops the Range, rewritten or not, when it does not match.
func LimitRanges(h string, size int64, maxRanges int) string {
	specs, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return h
	}
	n := 0
	for spec := range strings.SplitSeq(specs, ",") {
		if strings.TrimSpace(spec) != "" {
			n++
		}
	}
	if maxRanges < 1 || n > maxRanges {
		return ""
	}
	rs := make([]byteRange, 0, n)
	for spec := range strings.SplitSeq(specs, ",") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		r, satisfiable, ok := parseRangeSpec(spec, size)
		if !ok {
			return h
		}
		if satisfiable {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return h
	}
	slices.SortFunc(rs, func(a, b byteRange) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	merged := rs[:1]
	for _, r := range rs[1:] {
		last := &merged[len(merged)-1]
		if r.start <= last.end+1 {
			last.end = max(last.end, r.end)
			continue
		}
		merged = append(merged, r)
	}
	var b strings.Builder
	b.WriteString("bytes=")
	for i, r := range merged {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(r.start, 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatInt(r.end, 10))
	}
	return b.String()
}

// parseRangeSpec parses one range-spec ("a-b", "a-", "-n") of a file of
// size bytes as http.ServeContent does: ok is false when it does not
// parse, satisfiable false when it starts at or after the end (or is a
// suffix of length 0).
func parseRangeSpec(spec string, size int64) (r byteRange, satisfiable, ok bool) {
	first, last, found := strings.Cut(spec, "-")
	if !found {
		return r, false, false
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if first == "" {
		if last == "" || last[0] == '-' || last[0] == '+' {
			return r, false, false
		}
		n, err := strconv.ParseInt(last, 10, 64)
		if err != nil || n < 0 {
			return r, false, false
		}
		if n == 0 || size == 0 {
			return r, false, true
		}
		return byteRange{max(size-n, 0), size - 1}, true, true
	}
	if first[0] == '-' || first[0] == '+' {
		return r, false, false
	}
	start, err := strconv.ParseInt(first, 10, 64)
	if err != nil || start < 0 {
		return r, false, false
	}
	end := size - 1
	if last != "" {
		if last[0] == '-' || last[0] == '+' {
			return r, false, false
		}
		e, err := strconv.ParseInt(last, 10, 64)
		if err != nil || start > e {
			return r, false, false
		}
		end = min(e, size-1)
	}
	if start >= size {
		return r, false, true
	}
	return byteRange{start, end}, true, true
}
