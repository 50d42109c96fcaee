package serve

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sendChunk is the most that one write of a response is given a send
// timeout for: a large write or a sendfile is cut into pieces of this
// size, each with its own deadline, so that a client that takes the
// response slowly but steadily is never cut off in the middle of one.
// With the default timeouts.send of 60 s a client must take 128 KiB a
// minute (about 2 KB/s) to keep its download.
const sendChunk = 128 << 10

// withSendTimeout returns h with the send timeout of nginx (send_timeout)
// and HAProxy (timeout client) on its responses: every write must be
// taken by the client within send, or the connection is closed. It is a
// timeout between two successive writes, not on the whole response, so a
// slow client downloading a large file keeps going while one that stops
// reading (a slowloris reader) lets go of its connection, goroutine and
// file after send. total, when positive, is http.Server.WriteTimeout: no
// write deadline goes past the request's start + total. cut, when not
// nil, counts the responses cut off by the send timeout. send 0 returns h.
//
// http.Server clears the write deadline after each response, so one
// response's deadline never reaches the next on a keep-alive connection.
// A handler that hijacks its connection never wrote through the writer,
// and its connection's deadline is left alone.
func withSendTimeout(h http.Handler, send, total time.Duration, cut prometheus.Counter) http.Handler {
	if send <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &sendWriter{ResponseWriter: w, send: send}
		if d, ok := w.(deadliner); ok { // net/http's own writer: no ResponseController to make
			sw.dl = d
		} else {
			sw.dl = http.NewResponseController(w)
		}
		if total > 0 {
			sw.end = time.Now().Add(total)
		}
		h.ServeHTTP(sw, r)
		if !sw.armed.IsZero() {
			// What is buffered is flushed after the handler returns.
			sw.arm()
		}
		if sw.cut && cut != nil {
			cut.Inc()
		}
	})
}

// sendWriter arms the connection's write deadline before every write. It
// passes io.ReaderFrom through (so http.ServeContent keeps using
// sendfile) and supports http.ResponseController through Unwrap.
type sendWriter struct {
	http.ResponseWriter
	dl    deadliner // sets the connection's write deadline
	send  time.Duration
	end   time.Time // the deadline that http.Server.WriteTimeout sets; zero: none
	armed time.Time // when the deadline was last set; zero: never
	cut   bool      // a write ran into the send timeout
}

// deadliner is what sets a response's write deadline: net/http's
// response, or an http.ResponseController for a wrapped one.
type deadliner interface {
	SetWriteDeadline(time.Time) error
}

// note records whether err is the send timeout's, and returns it.
func (w *sendWriter) note(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		w.cut = true
	}
	return err
}

var _ io.ReaderFrom = (*sendWriter)(nil)

// arm sets the write deadline to send from now (no later than end),
// unless it set it less than send/16 ago: a deadline costs a change of
// the runtime's timers, and a client then has between 15/16 of send and
// send to take the next piece. A writer that can not have deadlines
// (ErrNotSupported) is left without.
func (w *sendWriter) arm() {
	now := time.Now()
	if !w.armed.IsZero() && now.Sub(w.armed) < w.send/16 {
		return
	}
	d := now.Add(w.send)
	if !w.end.IsZero() && d.After(w.end) {
		d = w.end
	}
	_ = w.dl.SetWriteDeadline(d)
	w.armed = now
}

func (w *sendWriter) WriteHeader(code int) {
	w.arm() // a 1xx header is written at once
	w.ResponseWriter.WriteHeader(code)
}

func (w *sendWriter) Write(b []byte) (int, error) {
	n := 0
	for {
		k := min(len(b)-n, sendChunk)
		w.arm()
		m, err := w.ResponseWriter.Write(b[n : n+k])
		n += m
		if err != nil || n == len(b) {
			return n, w.note(err)
		}
	}
}

// ReadFrom hands src to the underlying writer's ReadFrom (sendfile) a
// sendChunk at a time. A *io.LimitedReader (what http.ServeContent
// passes) is cut into LimitedReaders of the reader it limits, not
// wrapped again, since sendfile takes one level of limit only.
func (w *sendWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	if !ok {
		w.arm()
		return io.Copy(writerOnly{w}, src)
	}
	limit := int64(-1) // no limit
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
		w.arm()
		n, err := rf.ReadFrom(&io.LimitedReader{R: src, N: want})
		total += n
		if limit > 0 {
			limit -= n
		}
		if err != nil || n < want {
			return total, w.note(err)
		}
	}
	return total, nil
}

// Flush flushes the underlying writer when it can.
func (w *sendWriter) Flush() {
	w.arm()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (w *sendWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
