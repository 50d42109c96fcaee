package content

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// maxLine is the longest line a decoder reads: a path of MaxPathLen bytes
// all escaped, and the numbers before it.
const maxLine = 3*MaxPathLen + 64

// header is a decoded header line.
type header struct {
	kind     string
	from, to uint64 // from is 0 for a full index
	count    int
}

// decoder reads the wire format line by line, each error naming the line.
type decoder struct {
	br   *bufio.Reader
	lim  Limits
	line int
	prev string // the previous line's path
}

func newDecoder(r io.Reader, lim Limits) *decoder {
	lim = lim.withDefaults()
	return &decoder{br: bufio.NewReaderSize(&capReader{r: r, left: lim.MaxBytes}, maxLine+1), lim: lim}
}

// errTooBig is what a capReader returns past its bound.
var errTooBig = errors.New("too big")

// capReader reads at most left bytes of r, then fails with errTooBig.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errTooBig
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (d *decoder) errorf(format string, args ...any) error {
	return errorf("line %d: %s", d.line, fmt.Sprintf(format, args...))
}

// next returns the next line without its newline, or io.EOF at the end.
func (d *decoder) next() ([]byte, error) {
	b, err := d.br.ReadSlice('\n')
	if err == io.EOF && len(b) == 0 {
		return nil, io.EOF
	}
	d.line++
	switch {
	case errors.Is(err, errTooBig):
		return nil, fmt.Errorf("%w: line %d: more than %d bytes", ErrTooMany, d.line, d.lim.MaxBytes)
	case err == bufio.ErrBufferFull:
		return nil, d.errorf("longer than %d bytes", maxLine)
	case err == io.EOF:
		return nil, d.errorf("no newline at the end")
	case err != nil:
		return nil, fmt.Errorf("content: line %d: %w", d.line, err)
	}
	return b[:len(b)-1], nil
}

// header reads the header line.
func (d *decoder) header() (header, error) {
	b, err := d.next()
	if err == io.EOF {
		return header{}, errorf("empty input, no header")
	}
	if err != nil {
		return header{}, err
	}
	f := bytes.Split(b, []byte{' '})
	if len(f) < 3 || string(f[0]) != magic {
		return header{}, d.errorf("not a header %q", clip(b))
	}
	if string(f[1]) != formatVersion {
		return header{}, d.errorf("format version %q, want %s", clip(f[1]), formatVersion)
	}
	h := header{kind: string(f[2])}
	var nums []uint64
	switch {
	case h.kind == kindFull && len(f) == 5:
		nums, err = d.uints(f[3:])
		h.to = nums[0]
	case h.kind == kindChanges && len(f) == 6:
		nums, err = d.uints(f[3:])
		h.from, h.to = nums[0], nums[1]
		if err == nil && h.to < h.from {
			err = d.errorf("changes from version %d back to %d", h.from, h.to)
		}
	default:
		return header{}, d.errorf("not a header %q", clip(b))
	}
	if err != nil {
		return header{}, err
	}
	if n := nums[len(nums)-1]; n > uint64(d.lim.MaxFiles) {
		return header{}, fmt.Errorf("%w: line 1: %d entries, more than %d", ErrTooMany, n, d.lim.MaxFiles)
	}
	h.count = int(nums[len(nums)-1])
	return h, nil
}

func (d *decoder) uints(fields [][]byte) ([]uint64, error) {
	out := make([]uint64, len(fields))
	for i, f := range fields {
		n, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return out, d.errorf("%q is not a number", clip(f))
		}
		out[i] = n
	}
	return out, nil
}

// path returns the path of fields SHARED and SUFFIX, checked, and after
// the previous line's.
func (d *decoder) path(shared, suffix []byte) (string, error) {
	n, err := strconv.ParseUint(string(shared), 10, 16)
	if err != nil || int(n) > len(d.prev) {
		return "", d.errorf("shared prefix %q: not a number up to %d", clip(shared), len(d.prev))
	}
	s, err := unescapePath(suffix)
	if err != nil {
		return "", d.errorf("%v", err)
	}
	p := d.prev[:n] + s
	if err := checkPath(p); err != nil {
		return "", d.errorf("%v", err)
	}
	if p <= d.prev {
		return "", d.errorf("path %q after %q: not in order or a duplicate", p, d.prev)
	}
	d.prev = p
	return p, nil
}

// entry decodes the fields SHARED SIZE MTIME SUFFIX.
func (d *decoder) entry(f [][]byte) (Entry, error) {
	if len(f) != 4 {
		return Entry{}, d.errorf("%d fields, want 4 (shared size mtime path)", len(f))
	}
	p, err := d.path(f[0], f[3])
	if err != nil {
		return Entry{}, err
	}
	size, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil || size < 0 {
		return Entry{}, d.errorf("path %q: size %q", p, clip(f[1]))
	}
	mtime, err := parseMTime(f[2])
	if err != nil {
		return Entry{}, d.errorf("path %q: %v", p, err)
	}
	return Entry{Path: p, Size: size, MTime: mtime}, nil
}

// end checks that nothing follows the last of count lines.
func (d *decoder) end(count int) error {
	_, err := d.next()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	return d.errorf("data after the %d entries that the header announced", count)
}

// clip shortens b for an error message.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return append(b[:64:64], "..."...)
	}
	return b
}
