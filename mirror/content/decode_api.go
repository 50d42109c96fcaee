package content

import (
	"bytes"
	"fmt"
	"io"
	"math"
)

// DecodeIndex reads a full index in the wire format, refusing with an
// error that names the line anything malformed, out of order, duplicated
// or past lim.
func DecodeIndex(r io.Reader, lim Limits) (*Index, error) {
	d := newDecoder(r, lim)
	h, err := d.header()
	if err != nil {
		return nil, err
	}
	if h.kind != kindFull {
		return nil, d.errorf("a change set, not a full index")
	}
	return d.index(h)
}

// DecodeChanges reads a change set in the wire format, refusing as
// DecodeIndex does.
func DecodeChanges(r io.Reader, lim Limits) (Changes, error) {
	d := newDecoder(r, lim)
	h, err := d.header()
	if err != nil {
		return Changes{}, err
	}
	if h.kind != kindChanges {
		return Changes{}, d.errorf("a full index, not a change set")
	}
	return d.changes(h)
}

func (d *decoder) index(h header) (*Index, error) {
	b := newBuilder(min(h.count, 1<<16))
	for range h.count {
		line, err := d.next()
		if err != nil {
			return nil, d.truncated(err, h.count)
		}
		e, err := d.entry(fields(line, 4))
		if err != nil {
			return nil, err
		}
		if b.arena.Len()+len(e.Path) > math.MaxUint32 {
			return nil, fmt.Errorf("%w: line %d: more than 4 GiB of paths", ErrTooMany, d.line)
		}
		b.add(e)
	}
	if err := d.end(h.count); err != nil {
		return nil, err
	}
	return b.index(h.to), nil
}

func (d *decoder) changes(h header) (Changes, error) {
	ch := Changes{From: h.from, To: h.to, Changes: make([]Change, 0, min(h.count, 1<<16))}
	for range h.count {
		line, err := d.next()
		if err != nil {
			return Changes{}, d.truncated(err, h.count)
		}
		c, err := d.change(line)
		if err != nil {
			return Changes{}, err
		}
		ch.Changes = append(ch.Changes, c)
	}
	return ch, d.end(h.count)
}

// change decodes "OP SHARED SIZE MTIME SUFFIX" or "- SHARED SUFFIX".
func (d *decoder) change(line []byte) (Change, error) {
	if len(line) < 2 || line[1] != ' ' {
		return Change{}, d.errorf("no op")
	}
	switch op := Op(line[0]); op {
	case Add, Modify:
		e, err := d.entry(fields(line[2:], 4))
		return Change{Op: op, Entry: e}, err
	case Remove:
		f := fields(line[2:], 2)
		if len(f) != 2 {
			return Change{}, d.errorf("%d fields, want 3 (- shared path)", len(f)+1)
		}
		p, err := d.path(f[0], f[1])
		return Change{Op: Remove, Entry: Entry{Path: p}}, err
	default:
		return Change{}, d.errorf("unknown op %q", clip(line[:1]))
	}
}

// truncated turns the end of the input before count lines into an error.
func (d *decoder) truncated(err error, count int) error {
	if err == io.EOF {
		return d.errorf("truncated: the header announced %d entries", count)
	}
	return err
}

// fields splits line at spaces into at most n fields, the last one the
// rest (a path has no unescaped space, so a stray one is an error later).
func fields(line []byte, n int) [][]byte {
	out := make([][]byte, 0, n)
	for len(out) < n-1 {
		a, rest, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			break
		}
		out = append(out, a)
		line = rest
	}
	return append(out, line)
}
