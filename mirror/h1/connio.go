package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// sendChunk is the most that one write is given a send timeout for: a
// larger write, sendfile or splice goes in pieces of this size, each
// with its own deadline, so that a client that takes a response slowly
// but steadily is never cut off in the middle of one.
const sendChunk = 128 << 10

// headRoom is the space kept before a buffered body for its head.
const headRoom = 1 << 10

// connWriter gathers a response's head and body in a buffer of the pool
// (taken when needed, given back after each response) and writes it to
// the connection with the send timeout.
type connWriter struct {
	c      *serverConn
	bp     *[]byte // nil: none taken
	lo, hi int     // what is unsent: (*bp)[lo:hi]
	head   []byte  // the head being built
	keys   []string
	armed  time.Time // when the send timeout was last armed
	end    time.Time // WriteTimeout's deadline; zero: none
	err    error     // a write failed: the connection is done
	cut    bool      // the send timeout cut the connection off
}

func (wr *connWriter) init(c *serverConn) { wr.c = c }

// start prepares the writer for a response.
func (wr *connWriter) start() {
	wr.lo, wr.hi = headRoom, headRoom
	if d := wr.c.s.WriteTimeout; d > 0 {
		wr.end = time.Now().Add(d)
		wr.armed = time.Time{}
		if wr.c.s.SendTimeout <= 0 {
			_ = wr.c.rwc.SetWriteDeadline(wr.end)
		}
	}
}

// finish ends a response: its buffer goes back, WriteTimeout's deadline
// is lifted.
func (wr *connWriter) finish() {
	if !wr.end.IsZero() {
		wr.end, wr.armed = time.Time{}, time.Time{}
		_ = wr.c.rwc.SetWriteDeadline(time.Time{})
	}
	wr.release()
}

func (wr *connWriter) release() {
	if wr.bp != nil {
		writerPool.Put(wr.bp)
		wr.bp = nil
	}
}

func (wr *connWriter) buf() []byte {
	if wr.bp == nil {
		if bp, ok := writerPool.Get().(*[]byte); ok {
			wr.bp = bp
		} else {
			b := make([]byte, writeBufferSize)
			wr.bp = &b
		}
	}
	return *wr.bp
}

// fits reports whether n more bytes fit the buffer.
func (wr *connWriter) fits(n int) bool { return wr.hi+n <= writeBufferSize }

func (wr *connWriter) room() int { return writeBufferSize - wr.hi }

func (wr *connWriter) buffer(p []byte) { wr.hi += copy(wr.buf()[wr.hi:], p) }

func (wr *connWriter) bufferString(s string) { wr.hi += copy(wr.buf()[wr.hi:], s) }

func (wr *connWriter) pending() int { return wr.hi - wr.lo }

// body is what is buffered (before the head: the body's first bytes).
func (wr *connWriter) body() []byte {
	if wr.bp == nil {
		return nil
	}
	return (*wr.bp)[wr.lo:wr.hi]
}

// fill reads from src into the buffer, at most max bytes; nil only
// when it read max.
func (wr *connWriter) fill(src io.Reader, max int) (int, error) {
	b := wr.buf()
	end, n := wr.hi+max, 0
	for wr.hi < end {
		k, err := src.Read(b[wr.hi:end])
		wr.hi += k
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// placeHead puts the head h before the buffered body (dropped with
// dropBody).
func (wr *connWriter) placeHead(h []byte, dropBody bool) {
	b := wr.buf()
	if dropBody {
		wr.hi = wr.lo
	}
	switch {
	case len(h) <= wr.lo:
		wr.lo -= len(h)
		copy(b[wr.lo:], h)
	case wr.hi == wr.lo && len(h) <= len(b):
		wr.lo, wr.hi = 0, copy(b, h)
	default:
		_ = wr.writeDirect(h)
	}
}

// writeBody sends p after the head: through the buffer when it fits,
// else at once; as chunks when chunked.
func (wr *connWriter) writeBody(p []byte, chunked bool) error {
	if wr.err != nil {
		return wr.err
	}
	if chunked {
		return wr.writeChunks(p)
	}
	b := wr.buf()
	if wr.hi+len(p) <= len(b) {
		wr.hi += copy(b[wr.hi:], p)
		return nil
	}
	if err := wr.flush(); err != nil {
		return err
	}
	if len(p) < len(b)/2 {
		wr.lo, wr.hi = 0, copy(b, p)
		return nil
	}
	return wr.writeDirect(p)
}

// writeChunks buffers p as chunks, writing the buffer when it is full.
func (wr *connWriter) writeChunks(p []byte) error {
	const overhead = 16 + 4 // hex size, two CRLFs
	for len(p) > 0 {
		b := wr.buf()
		room := len(b) - wr.hi - overhead
		if room < 512 {
			if err := wr.flush(); err != nil {
				return err
			}
			continue
		}
		k := min(len(p), room)
		c := strconv.AppendInt(b[:wr.hi], int64(k), 16)
		c = append(c, "\r\n"...)
		c = append(c, p[:k]...)
		c = append(c, "\r\n"...)
		wr.hi = len(c)
		p = p[k:]
	}
	return nil
}

// lastChunk buffers the last chunk with the trailers.
func (wr *connWriter) lastChunk(t http.Header) {
	tail := bytes.NewBufferString("0\r\n")
	_ = t.Write(tail) // sorted, as net/http writes them
	tail.WriteString("\r\n")
	_ = wr.writeBody(tail.Bytes(), false)
}

// flush writes what is buffered.
func (wr *connWriter) flush() error {
	if wr.hi > wr.lo {
		_ = wr.writeDirect((*wr.bp)[wr.lo:wr.hi])
	}
	wr.lo, wr.hi = 0, 0
	return wr.err
}

// writeDirect writes p to the connection, in pieces of sendChunk under
// the send timeout.
func (wr *connWriter) writeDirect(p []byte) error {
	if wr.err != nil {
		return wr.err
	}
	send := wr.c.s.SendTimeout
	for len(p) > 0 {
		k := len(p)
		if send > 0 {
			k = min(k, sendChunk)
			wr.arm()
		}
		n, err := wr.c.rwc.Write(p[:k])
		p = p[n:]
		if err != nil {
			wr.fail(err)
			return err
		}
	}
	return nil
}

// readFrom hands src to the connection's ReadFrom, in pieces of
// sendChunk under the send timeout. A *io.LimitedReader is cut into
// LimitedReaders of the reader it limits, since sendfile takes one level
// of limit only.
func (wr *connWriter) readFrom(rf io.ReaderFrom, src io.Reader) (int64, error) {
	if wr.err != nil {
		return 0, wr.err
	}
	if wr.c.s.SendTimeout <= 0 {
		n, err := rf.ReadFrom(src)
		if err != nil {
			wr.fail(err)
		}
		return n, err
	}
	limit := int64(-1)
	if lr, ok := src.(*io.LimitedReader); ok {
		src, limit = lr.R, lr.N
		defer func() { lr.N = limit }()
	}
	var total int64
	for limit != 0 {
		want := int64(sendChunk)
		if limit > 0 {
			want = min(want, limit)
		}
		wr.arm()
		n, err := rf.ReadFrom(&io.LimitedReader{R: src, N: want})
		total += n
		if limit > 0 {
			limit -= n
		}
		if err != nil {
			wr.fail(err)
			return total, err
		}
		if n < want {
			break
		}
	}
	return total, nil
}

// arm sets the write deadline to SendTimeout from now (no later than
// WriteTimeout's), unless it did less than SendTimeout/16 ago: a client
// then has between 15/16 of it and all of it to take the next piece.
func (wr *connWriter) arm() {
	now := time.Now()
	send := wr.c.s.SendTimeout
	if !wr.armed.IsZero() && now.Sub(wr.armed) < send/16 {
		return
	}
	d := now.Add(send)
	if !wr.end.IsZero() && d.After(wr.end) {
		d = wr.end
	}
	_ = wr.c.rwc.SetWriteDeadline(d)
	wr.armed = now
}

func (wr *connWriter) fail(err error) {
	wr.err = err
	if wr.c.s.SendTimeout > 0 && errors.Is(err, os.ErrDeadlineExceeded) && !wr.cut {
		wr.cut = true
		if wr.c.s.SendCut != nil {
			wr.c.s.SendCut()
		}
	}
}

// leaveCheckAfter is how long a request runs (at least; at most twice
// it) before a read watches for its client leaving (which cancels its
// context).
const leaveCheckAfter = 50 * time.Millisecond

// connReader reads the connection for the request heads and bodies,
// with net/http's limit on a head, and watches for the client leaving
// while a handler runs: a background read of one byte, started once the
// request has run for leaveCheckAfter with nothing left to read of it;
// its end (EOF, an error) cancels the request, a byte it reads (the
// next request's) is kept. The timer of the watch is armed once per
// leaveCheckAfter on a busy connection, not once per request: when it
// fires on a newer request than it was armed for, it is armed again,
// so a request's watch starts between leaveCheckAfter and twice it
// after the request.
type connReader struct {
	rwc    net.Conn
	remain int64  // what a head may still read
	rec    []byte // what was read of a head, when recording
	recOn  bool

	mu       sync.Mutex
	cond     sync.Cond
	inRead   bool
	bgRead   bool
	aborted  bool
	hasByte  bool
	byteBuf  [1]byte
	watching bool
	watchGen uint64 // watches started on the connection
	timerGen uint64 // the watch the pending timer is for
	timerOn  bool   // the timer is pending
	cancel   context.CancelFunc
	left     bool   // the client left while a request ran
	onLeave  func() // AfterLeave's
	leave    Leave
	timer    *time.Timer
	// idleAt is when the read deadline in force was set as the idle one
	// (Unix ns); 0: another deadline is.
	idleAt atomic.Int64
}

func (cr *connReader) init(rwc net.Conn) {
	cr.rwc = rwc
	cr.remain = math.MaxInt64
	cr.cond.L = &cr.mu
}

// setLimit limits what the next reads may read; n < 0: no limit.
func (cr *connReader) setLimit(n int64) {
	if n < 0 {
		n = math.MaxInt64
	}
	cr.mu.Lock()
	cr.remain = n
	cr.mu.Unlock()
}

func (cr *connReader) hitLimit() bool {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.remain <= 0
}

func (cr *connReader) Read(p []byte) (int, error) {
	cr.mu.Lock()
	for cr.bgRead {
		cr.abortLocked()
	}
	if cr.remain <= 0 {
		cr.mu.Unlock()
		return 0, io.EOF
	}
	if len(p) == 0 {
		cr.mu.Unlock()
		return 0, nil
	}
	if cr.hasByte {
		p[0], cr.hasByte = cr.byteBuf[0], false
		cr.remain--
		cr.mu.Unlock()
		return 1, nil
	}
	if int64(len(p)) > cr.remain {
		p = p[:cr.remain]
	}
	cr.inRead = true
	cr.mu.Unlock()
	n, err := cr.rwc.Read(p)
	cr.mu.Lock()
	cr.inRead = false
	cr.remain -= int64(n)
	if cr.recOn {
		cr.rec = append(cr.rec, p[:n]...)
	}
	cr.mu.Unlock()
	return n, err
}

// record starts keeping what is read, from what br holds already.
func (cr *connReader) record(br *bufio.Reader) {
	b, _ := br.Peek(br.Buffered())
	cr.mu.Lock()
	cr.rec = append(cr.rec[:0], b...)
	if cr.hasByte {
		cr.rec = append(cr.rec, cr.byteBuf[0])
	}
	cr.recOn = true
	cr.mu.Unlock()
}

// recorded stops recording and returns what was kept (valid until the
// next record).
func (cr *connReader) recorded() []byte {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.recOn = false
	if cap(cr.rec) > 64<<10 {
		r := cr.rec
		cr.rec = nil
		return r
	}
	return cr.rec
}

// watch starts the leave watch of a request with nothing left to read:
// after leaveCheckAfter a background read, whose end calls cancel.
func (cr *connReader) watch(cancel context.CancelFunc) {
	cr.mu.Lock()
	cr.watching, cr.cancel = true, cancel
	cr.watchGen++
	if !cr.timerOn {
		cr.armTimer()
	}
	cr.mu.Unlock()
}

// armTimer starts the timer for the latest watch; the caller holds mu.
func (cr *connReader) armTimer() {
	cr.timerOn, cr.timerGen = true, cr.watchGen
	if cr.timer == nil {
		cr.timer = time.AfterFunc(leaveCheckAfter, cr.timerFired)
	} else {
		cr.timer.Reset(leaveCheckAfter)
	}
}

// timerFired starts the background read of the watch it was armed for,
// or is armed again for a newer one.
func (cr *connReader) timerFired() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.timerOn = false
	if !cr.watching {
		return
	}
	if cr.timerGen != cr.watchGen {
		cr.armTimer()
		return
	}
	cr.startBackgroundRead()
}

// startBackgroundRead starts the watch's read; the caller holds mu.
func (cr *connReader) startBackgroundRead() {
	if cr.inRead || cr.bgRead || cr.hasByte {
		return
	}
	cr.bgRead = true
	cr.idleAt.Store(0)
	_ = cr.rwc.SetReadDeadline(time.Time{})
	go cr.backgroundRead()
}

func (cr *connReader) backgroundRead() {
	n, err := cr.rwc.Read(cr.byteBuf[:])
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if n == 1 {
		cr.hasByte = true
	}
	var ne net.Error
	if err != nil && !(cr.aborted && errors.As(err, &ne) && ne.Timeout()) {
		cr.cancel() // the client left, or the connection failed
		cr.left = true
		if f := cr.onLeave; f != nil {
			cr.onLeave = nil
			go f()
		}
	}
	cr.aborted, cr.bgRead = false, false
	cr.cond.Broadcast()
}

// stopWatch ends the leave watch, and a background read with it (the
// timer, pending, finds no watch when it fires; stopTimer stops it).
func (cr *connReader) stopWatch() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.watching, cr.onLeave, cr.left = false, nil, false
	if cr.bgRead {
		cr.abortLocked()
	}
}

// stopTimer stops the watch's timer, at the connection's end.
func (cr *connReader) stopTimer() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.timer != nil {
		cr.timer.Stop()
	}
	cr.timerOn = false
}

// abortLocked ends the background read; the caller holds mu.
func (cr *connReader) abortLocked() {
	cr.aborted = true
	cr.idleAt.Store(0)
	_ = cr.rwc.SetReadDeadline(aLongTimeAgo)
	for cr.bgRead {
		cr.cond.Wait()
	}
	_ = cr.rwc.SetReadDeadline(time.Time{})
}

var aLongTimeAgo = time.Unix(1, 0)
