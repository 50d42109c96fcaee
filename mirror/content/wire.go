package content

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// The wire format's magic word and version, the first two fields of its
// header line.
const (
	magic         = "transmirror-index"
	formatVersion = "1"
	kindFull      = "full"
	kindChanges   = "changes"
)

// Bounds of what a decoder accepts by default.
const (
	// DefaultMaxFiles is the most files of an index or changes of a set.
	DefaultMaxFiles = 10_000_000
	// DefaultMaxBytes is the most bytes of an encoded index or change set.
	DefaultMaxBytes = 1 << 30
)

// Limits bound what a decoder accepts; a zero field takes its default.
type Limits struct {
	// MaxFiles is the most files (or changes) (default DefaultMaxFiles).
	MaxFiles int
	// MaxBytes is the most bytes read (default DefaultMaxBytes).
	MaxBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// EncodeIndex writes x in the wire format (see the package doc).
func EncodeIndex(w io.Writer, x *Index) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, "%s %s %s %d %d\n", magic, formatVersion, kindFull, x.Version(), x.Len())
	var line []byte
	prev := ""
	for e := range x.All() {
		line = appendEntry(line[:0], prev, e)
		bw.Write(line)
		prev = e.Path
	}
	return bw.Flush()
}

// EncodeChanges writes ch in the wire format (see the package doc).
func EncodeChanges(w io.Writer, ch Changes) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, "%s %s %s %d %d %d\n", magic, formatVersion, kindChanges, ch.From, ch.To, len(ch.Changes))
	var line []byte
	prev := ""
	for _, c := range ch.Changes {
		line = append(line[:0], byte(c.Op), ' ')
		if c.Op == Remove {
			line = appendPath(line, prev, c.Path)
			line = append(line, '\n')
		} else {
			line = appendEntry(line, prev, c.Entry)
		}
		bw.Write(line)
		prev = c.Path
	}
	return bw.Flush()
}

// appendEntry appends "SHARED SIZE MTIME SUFFIX\n".
func appendEntry(b []byte, prev string, e Entry) []byte {
	shared := sharedPrefix(prev, e.Path)
	b = strconv.AppendInt(b, int64(shared), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, e.Size, 10)
	b = append(b, ' ')
	b = appendMTime(b, e.MTime)
	b = append(b, ' ')
	b = escapePath(b, e.Path[shared:])
	return append(b, '\n')
}

// appendPath appends "SHARED SUFFIX".
func appendPath(b []byte, prev, p string) []byte {
	shared := sharedPrefix(prev, p)
	b = strconv.AppendInt(b, int64(shared), 10)
	b = append(b, ' ')
	return escapePath(b, p[shared:])
}

// sharedPrefix is the length of the longest common prefix of a and b,
// less one when b would be left with an empty suffix.
func sharedPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	if n == len(b) && n > 0 {
		n--
	}
	return n
}

// appendMTime appends ns as seconds, with ".NNNNNNNNN" when it has a
// fraction of a second.
func appendMTime(b []byte, ns int64) []byte {
	sec, frac := ns/1e9, ns%1e9
	if frac < 0 {
		sec, frac = sec-1, frac+1e9
	}
	b = strconv.AppendInt(b, sec, 10)
	if frac == 0 {
		return b
	}
	b = append(b, '.')
	digits := strconv.AppendInt(nil, frac+1e9, 10) // 1NNNNNNNNN
	return append(b, digits[1:]...)
}

// parseMTime reverses appendMTime.
func parseMTime(s []byte) (int64, error) {
	secs, frac, hasFrac := bytes.Cut(s, []byte{'.'})
	sec, err := strconv.ParseInt(string(secs), 10, 64)
	if err != nil || sec < -9e9 || sec > 9e9 {
		return 0, fmt.Errorf("mtime %q: not seconds since 1970 (within 285 years)", s)
	}
	ns := sec * 1e9
	if !hasFrac {
		return ns, nil
	}
	f, err := strconv.ParseUint(string(frac), 10, 32)
	if err != nil || len(frac) != 9 || f == 0 {
		return 0, fmt.Errorf("mtime %q: the fraction must be 9 digits, not all 0", s)
	}
	return ns + int64(f), nil
}
