package h1

import (
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
	"sync/atomic"
)

// ErrBodyTruncated is a body whose connection ended before its
// Content-Length.
var ErrBodyTruncated = errors.New("h1: body cut short")

// Body reads a response body by its framing: a Content-Length, chunked
// (decoded), or until the connection ends.
type Body struct {
	c         *Conn
	remaining int64     // Content-Length framing: bytes still to come; -1 other
	chunked   io.Reader // chunked framing; nil other
	untilEOF  bool      // the body ends with the connection
	done      bool      // read whole
	failed    bool      // a read failed: the connection is not used again
	aborted   atomic.Bool
	n         int64 // bytes read
}

// reset prepares b for the body of resp on c (head: of a HEAD request).
func (b *Body) reset(c *Conn, resp *Response, head bool) {
	*b = Body{c: c, remaining: -1}
	switch {
	case !resp.HasBody(head):
		b.done = true
	case resp.Chunked:
		b.chunked = httputil.NewChunkedReader(c.br)
	case resp.ContentLength >= 0:
		b.remaining = resp.ContentLength
		b.done = b.remaining == 0
	default:
		b.untilEOF = true
		resp.Close = true
	}
}

// Len is the bytes read so far.
func (b *Body) Len() int64 { return b.n }

// Read reads the body; io.EOF at its end.
func (b *Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.failed {
		return 0, ErrBodyTruncated
	}
	var n int
	var err error
	switch {
	case b.chunked != nil:
		n, err = b.chunked.Read(p)
		if err == io.EOF {
			err = b.skipTrailers()
		}
	case b.untilEOF:
		n, err = b.c.br.Read(p)
		if err == io.EOF {
			b.done = true
		}
	default:
		n, err = b.readLength(p)
	}
	b.n += int64(n)
	if err != nil && err != io.EOF {
		b.failed = true
	}
	return n, err
}

// skipTrailers reads the trailer section after a chunked body's last
// chunk, up to its empty line (the relay does not forward trailers), so
// that the connection is ready for the next response; io.EOF when it
// ends well.
func (b *Body) skipTrailers() error {
	for size := 0; ; {
		line, err := b.c.br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("%w: trailers: %w", ErrBodyTruncated, err)
		}
		if size += len(line); size > MaxHeadBytes {
			return fmt.Errorf("%w: trailers over %d bytes", ErrHeadTooLarge, MaxHeadBytes)
		}
		if len(trimEOL(line)) == 0 {
			b.done = true
			return io.EOF
		}
	}
}

// readLength reads from a body of known length.
func (b *Body) readLength(p []byte) (int, error) {
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.c.br.Read(p)
	b.remaining -= int64(n)
	switch {
	case b.remaining == 0:
		b.done = true
		return n, io.EOF
	case err == io.EOF:
		return n, fmt.Errorf("%w: %d bytes missing", ErrBodyTruncated, b.remaining)
	}
	return n, err
}

// WriteTo writes the body to w: what is already buffered in one write
// (a small response's whole body), the rest through a buffer of the
// pool's. A failed write is a *WriteError, a failed read is not.
func (b *Body) WriteTo(w io.Writer) (int64, error) {
	var total int64
	if b.chunked == nil && !b.untilEOF && !b.done && !b.failed {
		if k := min(int64(b.c.br.Buffered()), b.remaining); k > 0 {
			buf, _ := b.c.br.Peek(int(k))
			n, err := w.Write(buf)
			_, _ = b.c.br.Discard(n)
			b.remaining -= int64(n)
			b.n += int64(n)
			b.done = b.remaining == 0
			total += int64(n)
			if err != nil {
				return total, writeFailed(err)
			}
		}
	}
	if b.done {
		return total, nil
	}
	if rf, ok := w.(io.ReaderFrom); ok && b.chunked == nil && !b.untilEOF && !b.failed && b.remaining >= spliceMin {
		n, err := b.readFromSocket(rf)
		return total + n, err
	}
	bp := b.c.p.buffer()
	defer b.c.p.bufs.Put(bp)
	var f flusher
	if b.chunked != nil || b.untilEOF {
		f, _ = w.(flusher) // a stream: each piece on its way at once
	}
	n, err := copyBody(w, f, b, *bp)
	return total + n, err
}

// spliceMin is the least rest of a body that is handed to the writer's
// ReadFrom with the socket (below it a copy through a buffer is as cheap
// as the pipe of a splice).
const spliceMin = 64 << 10

// readFromSocket hands the rest of a body of known length to rf with the
// socket itself (its buffer is empty): net.TCPConn's ReadFrom splices
// from a TCP socket, through net/http's response writer and the
// wrappers that pass ReadFrom on. Which end failed is not said by the
// error; a socket that still works then was not the back end's fault: the
// error is a *WriteError.
func (b *Body) readFromSocket(rf io.ReaderFrom) (int64, error) {
	b.c.liftHeadDeadline()
	lr := &io.LimitedReader{R: b.c.nc, N: b.remaining}
	n, err := rf.ReadFrom(lr)
	b.remaining -= n
	b.n += n
	b.done = b.remaining == 0
	switch {
	case err != nil && !b.c.broken():
		b.failed = true
		return n, writeFailed(err)
	case err != nil:
		b.failed = true
		return n, err
	case !b.done:
		b.failed = true
		return n, fmt.Errorf("%w: %d bytes missing", ErrBodyTruncated, b.remaining)
	}
	return n, nil
}

// flusher is a writer that buffers, such as net/http's ResponseWriter.
type flusher interface{ Flush() }

// copyBody copies the body b to w through buf, flushing f (nil: none)
// after every write.
func copyBody(w io.Writer, f flusher, b *Body, buf []byte) (int64, error) {
	var total int64
	for {
		n, rerr := b.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, writeFailed(werr)
			}
			if f != nil {
				f.Flush()
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

// WriteError is a failure to write the body to the client, not the back
// end's.
type WriteError struct{ Err error }

func (e *WriteError) Error() string { return "h1: writing the body: " + e.Err.Error() }
func (e *WriteError) Unwrap() error { return e.Err }

func writeFailed(err error) error { return &WriteError{Err: err} }

// reusable reports whether the connection may carry another request:
// the body was read whole, no read failed, nothing aborted, and the
// response did not close the connection.
func (b *Body) reusable() bool {
	return b.done && !b.failed && !b.aborted.Load() && !b.c.resp.Close
}
