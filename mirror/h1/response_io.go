package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// finish completes the response after the handler: the head if it is
// still buffered, the last chunk, the write; true: the connection may
// carry another request.
func (w *response) finish() bool {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	wr := &w.c.wr
	if !w.headSent {
		w.sendHead(wr.body())
	}
	if w.chunking {
		wr.lastChunk(w.finalTrailers())
	}
	_ = wr.flush()
	w.c.cr.stopWatch()
	w.cancel()
	reuse := !w.closeAfter && wr.err == nil &&
		(w.isHead || w.clen < 0 || !bodyAllowed(w.status) || w.clen == w.written)
	wr.finish()
	if !reuse && w.tooBig {
		w.c.closeWriteAndWait()
	}
	return reuse
}

// copyBuffers are the buffers of copies through Write.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ReadFrom sends src as the body: what fits the write buffer with the
// head in one write, the rest through the connection's ReadFrom
// (sendfile from a file, splice from a socket), in pieces of sendChunk
// with the send timeout armed for each.
func (w *response) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := w.c.rwc.(io.ReaderFrom)
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !ok || w.c.hijacked || !bodyAllowed(w.status) || w.isHead || w.chunking {
		return w.copyFrom(src)
	}
	var n int64
	wr := &w.c.wr
	if !w.headSent {
		room, limited := int64(wr.room()), false
		if lr, ok := src.(*io.LimitedReader); ok && lr.N <= room {
			room, limited = lr.N, true
		}
		k, err := wr.fill(src, int(room))
		n += int64(k)
		w.written += int64(k)
		if err == io.EOF || err == nil && limited {
			return n, nil // all of it is buffered
		}
		if err != nil {
			return n, err
		}
		w.sendHead(wr.body())
		if w.chunking || w.isHead {
			k, err := w.copyFrom(src)
			return n + k, err
		}
	}
	if err := wr.flush(); err != nil {
		return n, err
	}
	k, err := wr.readFrom(rf, src)
	w.written += k
	return n + k, err
}

// copyFrom copies src through Write.
func (w *response) copyFrom(src io.Reader) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	return io.CopyBuffer(writerOnly{w}, src, *bp)
}

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

// FlushError sends the head and what is buffered.
func (w *response) FlushError() error {
	if w.c.hijacked {
		return http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		w.sendHead(w.c.wr.body())
	}
	return w.c.wr.flush()
}

func (w *response) Flush() { _ = w.FlushError() }

// Hijack hands the connection to the handler, with what was read of it
// beyond the request in the reader.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := w.c
	if c.hijacked || w.handlerDone {
		return nil, nil, http.ErrHijacked
	}
	if w.wroteHeader {
		if err := w.FlushError(); err != nil {
			return nil, nil, err
		}
	}
	c.cr.stopWatch()
	if c.cr.hasByte {
		if _, err := c.br.Peek(c.br.Buffered() + 1); err != nil {
			return nil, nil, err
		}
	}
	c.hijacked = true
	c.s.forget(c)
	_ = c.rwc.SetDeadline(time.Time{})
	c.wr.finish()
	return c.rwc, bufio.NewReadWriter(c.br, bufio.NewWriter(c.rwc)), nil
}

// SetReadDeadline is http.ResponseController's.
func (w *response) SetReadDeadline(t time.Time) error {
	w.c.cr.idleAt.Store(0)
	return w.c.rwc.SetReadDeadline(t)
}

// SetWriteDeadline is http.ResponseController's: t holds for the send
// timeout's re-arming interval, send/16.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.c.wr.armed = time.Now()
	return w.c.rwc.SetWriteDeadline(t)
}
