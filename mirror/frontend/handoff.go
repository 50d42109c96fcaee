//go:build unix

package frontend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler/site"
)

// Connection handoff.
//
// The front end passes an accepted client connection to a back end
// process on the same host: it hijacks the connection (http.Hijacker),
// and sends its file descriptor (SCM_RIGHTS) over the back end's Unix
// socket, together with the bytes the front end has already taken from
// it. Those bytes are the request head, written again from the parsed
// request (method, request URI exactly as received, protocol, Host, then
// the header fields in canonical form and sorted order), followed by
// whatever the server had read beyond the head (pipelined requests).
// Re-serializing was chosen over recording the raw bytes with a wrapping
// listener because it works with any server and listener the handler is
// mounted on; only header order and case change, which HTTP does not
// give meaning to. The back end (ListenHandoff) returns the connection
// from Accept with those bytes in front of what it reads next, and
// serves it like any other: the response goes from the back end straight
// to the client, and its peer address is the real client.
//
// Only GET and HEAD requests without a body, over HTTP/1.x without TLS,
// are handed off; others are proxied (handoffs_total{result="fallback"}),
// as is a request whose back end's socket cannot be reached. After a
// handoff the connection belongs to the back end for the rest of its life:
// further requests on a keep-alive connection go to the same back end
// without the front end choosing, so the policy decides per connection,
// not per request, for clients that reuse connections.
//
// The back end reports the requests it serves on a handed-off connection
// back over the same Unix connection (ReportHandoffs), so that the policy
// sees what it sees in proxy mode: a request is in flight on the back end
// from its start to its end, and Done gets the response's size. The lag
// is one write on a local socket. The front end holds the picked request
// in flight until the back end reports its end, or closes the Unix
// connection (the client's connection is closed, or the back end
// stopped), which ends whatever was still in flight with size 0. A back
// end that does not report (an older mirror) closes the Unix connection
// after the acknowledgement: its requests then count only while the
// handoff is in progress, as before.
//
// The wire format on the Unix stream socket, per handoff: one connection,
// the front end writes a 4-byte big-endian length and that many prefix
// bytes, with the descriptor attached to the first byte; the back end
// answers one byte "k" once it owns the connection, then, for every
// request it serves on it, a begin record ('b', the RequestKey's length
// as a uvarint, the RequestKey) and an end record ('e', the size as a
// uvarint: the Content-Length of a 200 response, else the bytes written
// for a 200, 0 for any other status). The socket is not authenticated:
// protect it with file system permissions.

// maxHandoffPrefix bounds the bytes sent with a connection.
const maxHandoffPrefix = 1 << 20

// handoffTimeout bounds dialing, sending and the acknowledgement.
const handoffTimeout = 2 * time.Second

// handoffAck is the back end's acknowledgement byte.
const handoffAck = 'k'

// Records of the back end's reports after the acknowledgement.
const (
	reportBegin = 'b'
	reportEnd   = 'e'
)

// handoffable reports whether r can be handed off as it is.
func handoffable(r *http.Request) bool {
	return r.ProtoMajor == 1 && r.TLS == nil &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.ContentLength == 0 && len(r.TransferEncoding) == 0 &&
		r.Header.Get("Upgrade") == ""
}

// serveHandoff hands the client connection to the picked back end.
// The request's admission s is given back when its end is reported.
func (h *handler) serveHandoff(w http.ResponseWriter, r *http.Request, req site.Request, s *slot) {
	if !handoffable(r) {
		h.m.handoffs.WithLabelValues(handoffFallback).Inc()
		h.serveProxy(w, r, req)
		return
	}
	b, err := h.pick(req, nil)
	if err != nil {
		http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		return
	}
	// Dial first: while the connection is not hijacked yet, a back end
	// whose socket is gone can still be served by proxy.
	d := net.Dialer{Timeout: handoffTimeout}
	c, err := d.DialContext(r.Context(), "unix", b.socket)
	if err != nil {
		h.backendFailed(b, errHandoff, err)
		h.release(b, req, 0)
		h.m.handoffs.WithLabelValues(handoffFallback).Inc()
		h.serveProxy(w, r, req)
		return
	}
	uc := c.(*net.UnixConn)
	defer uc.Close()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		h.release(b, req, 0)
		h.m.handoffs.WithLabelValues(handoffFallback).Inc()
		h.serveProxy(w, r, req)
		return
	}
	if h.contents != nil {
		// One request per handed-off connection: the next one comes
		// back to be sent to a back end that has its file.
		r.Header.Set("Connection", "close")
	}
	var prefix bytes.Buffer
	writeRequestHead(&prefix, r)
	if n := brw.Reader.Buffered(); n > 0 {
		pending, _ := brw.Reader.Peek(n)
		prefix.Write(pending)
	}
	if err := sendConn(uc, conn, prefix.Bytes()); err != nil {
		h.backendFailed(b, errHandoff, err)
		h.m.handoffs.WithLabelValues(handoffError).Inc()
		_ = conn.SetWriteDeadline(time.Now().Add(handoffTimeout))
		_, _ = io.WriteString(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 12\r\nConnection: close\r\n\r\nBad Gateway\n")
		conn.Close()
		h.release(b, req, 0)
		return
	}
	// The back end holds its own descriptor; the front end's copy would
	// keep the connection open after the back end closes it.
	conn.Close()
	h.transition(b, "request", "")(b.health.request(true, ""))
	h.m.handoffs.WithLabelValues(handoffOK).Inc()
	h.followHandoff(uc, b, req, s)
}

// followHandoff reads the back end's reports of the requests it serves
// on a handed-off connection, keeping b's in-flight count and telling
// the policy of each end, until the back end (or Close) closes uc. The
// picked request req counts as in flight from the pick, and holds its
// admission s until its end; later requests take a slot without waiting.
func (h *handler) followHandoff(uc *net.UnixConn, b *backend, req site.Request, s *slot) {
	open := 1 // requests counted in flight on b
	cur := req
	end := func(size int64) {
		h.release(b, cur, size)
		if s.held {
			s.release() // the picked request
		} else {
			h.adm.done()
		}
		open--
	}
	defer func() {
		for open > 0 {
			end(0)
		}
	}()
	if !h.track(uc) {
		return // closing
	}
	defer h.untrack(uc)
	if err := uc.SetDeadline(time.Time{}); err != nil {
		return
	}
	br := bufio.NewReaderSize(uc, 4<<10)
	first := true
	for {
		kind, key, size, err := readReport(br)
		if err != nil {
			return
		}
		switch kind {
		case reportBegin:
			if first {
				first = false // the picked request, counted already
				continue
			}
			for open > 0 { // requests on one connection run one at a time
				end(0)
			}
			h.begin(b)
			h.adm.take()
			open++
			cur = site.Request{Key: policyKey(key, h.keyQuery), Client: req.Client}
		case reportEnd:
			first = false
			if open > 0 {
				end(size)
			}
		}
	}
}

// readReport reads one record of a back end's reports.
func readReport(br *bufio.Reader) (kind byte, key string, size int64, err error) {
	if kind, err = br.ReadByte(); err != nil {
		return 0, "", 0, err
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return 0, "", 0, err
	}
	switch kind {
	case reportBegin:
		if n > maxReportKey {
			return 0, "", 0, fmt.Errorf("frontend: handoff report: request key of %d bytes", n)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return 0, "", 0, err
		}
		return kind, string(b), 0, nil
	case reportEnd:
		if n > 1<<62 {
			return 0, "", 0, fmt.Errorf("frontend: handoff report: size %d", n)
		}
		return kind, "", int64(n), nil
	}
	return 0, "", 0, fmt.Errorf("frontend: handoff report: record %q", kind)
}

// track registers uc as a handoff the front end follows, so that Close
// can end it; it reports false once the handler is closing.
func (h *handler) track(uc *net.UnixConn) bool {
	h.hmu.Lock()
	defer h.hmu.Unlock()
	if h.closing {
		return false
	}
	if h.followed == nil {
		h.followed = make(map[*net.UnixConn]struct{})
	}
	h.followed[uc] = struct{}{}
	h.wg.Add(1)
	return true
}

func (h *handler) untrack(uc *net.UnixConn) {
	h.hmu.Lock()
	delete(h.followed, uc)
	h.hmu.Unlock()
	h.wg.Done()
}

// stopFollowing closes the Unix connections of the handoffs followed, so
// that their readers end and release what was in flight.
func (h *handler) stopFollowing() {
	h.hmu.Lock()
	defer h.hmu.Unlock()
	h.closing = true
	for uc := range h.followed {
		_ = uc.Close()
	}
}

// writeRequestHead writes r's request line and header as received, in
// canonical form.
func writeRequestHead(w *bytes.Buffer, r *http.Request) {
	fmt.Fprintf(w, "%s %s %s\r\n", r.Method, r.RequestURI, r.Proto)
	if r.Host != "" {
		fmt.Fprintf(w, "Host: %s\r\n", r.Host)
	}
	_ = r.Header.Write(w)
	w.WriteString("\r\n")
}

// sendConn sends conn's descriptor and prefix over uc and waits for the
// back end's acknowledgement.
func sendConn(uc *net.UnixConn, conn net.Conn, prefix []byte) error {
	if len(prefix) > maxHandoffPrefix {
		return fmt.Errorf("frontend: handoff: %d bytes read ahead, more than %d", len(prefix), maxHandoffPrefix)
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return fmt.Errorf("frontend: handoff: %T has no file descriptor", conn)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return fmt.Errorf("frontend: handoff: %w", err)
	}
	if err := uc.SetDeadline(time.Now().Add(handoffTimeout)); err != nil {
		return fmt.Errorf("frontend: handoff: %w", err)
	}
	msg := make([]byte, 4+len(prefix))
	binary.BigEndian.PutUint32(msg, uint32(len(prefix)))
	copy(msg[4:], prefix)
	var n int
	var werr error
	err = rc.Control(func(fd uintptr) {
		n, _, werr = uc.WriteMsgUnix(msg, syscall.UnixRights(int(fd)), nil)
	})
	if err == nil {
		err = werr
	}
	if err == nil && n < len(msg) {
		_, err = uc.Write(msg[n:])
	}
	if err != nil {
		return fmt.Errorf("frontend: handoff: send: %w", err)
	}
	var ack [1]byte
	if _, err := io.ReadFull(uc, ack[:]); err != nil {
		return fmt.Errorf("frontend: handoff: no acknowledgement: %w", err)
	}
	if ack[0] != handoffAck {
		return fmt.Errorf("frontend: handoff: bad acknowledgement %q", ack[0])
	}
	return nil
}

// ListenHandoff listens on the Unix socket path for connections handed
// off by a site front end in handoff mode, and returns them from Accept
// as net.Conns whose first reads yield the bytes the front end had read
// (the request head), so that an http.Server (or Server.Serve) serving
// the listener answers the client directly. The connections are TCP
// connections to the clients: RemoteAddr is the client, and responses
// still go out with sendfile. A stale socket file left by a process that
// died is replaced; one that a live process listens on is an error.
// Close stops accepting and removes the socket file.
func ListenHandoff(path string) (net.Listener, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("frontend: handoff: listen: %w", err)
	}
	l := &handoffListener{ln: ln, conns: make(chan net.Conn), done: make(chan struct{})}
	l.wg.Go(l.acceptLoop)
	return l, nil
}

// removeStaleSocket removes path when it is a socket nobody listens on.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil // absent, or not a socket: Listen reports it
	}
	c, err := net.DialTimeout("unix", path, handoffTimeout)
	if err == nil {
		c.Close()
		return fmt.Errorf("frontend: handoff: %s is in use", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("frontend: handoff: remove stale socket: %w", err)
	}
	return nil
}

// handoffListener is the back end's side of connection handoff; see
// ListenHandoff.
type handoffListener struct {
	ln        *net.UnixListener
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

var _ net.Listener = (*handoffListener)(nil)

func (l *handoffListener) acceptLoop() {
	for {
		uc, err := l.ln.AcceptUnix()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: back off briefly rather than spin.
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-l.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		l.wg.Go(func() { l.receive(uc) })
	}
}

// receive takes one connection from uc and queues it for Accept; uc
// then carries the reports of its requests (see ReportHandoffs) and is
// closed with the connection.
func (l *handoffListener) receive(uc *net.UnixConn) {
	conn, err := recvConn(uc)
	if err != nil {
		uc.Close()
		return // the front end sees no acknowledgement and answers 502
	}
	// Acknowledge first: from then on the connection is the back end's
	// alone, and if this listener closes before Accept takes it, the
	// client sees the connection close rather than two answers.
	if _, err := uc.Write([]byte{handoffAck}); err != nil {
		conn.Close()
		uc.Close()
		return
	}
	conn.reports = &handoffReports{uc: uc}
	select {
	case l.conns <- conn:
	case <-l.done:
		conn.Close()
	}
}

// recvConn reads one handed-off connection from uc.
func recvConn(uc *net.UnixConn) (*handoffConn, error) {
	if err := uc.SetDeadline(time.Now().Add(handoffTimeout)); err != nil {
		return nil, err
	}
	// A request head fits; a longer prefix is read on below.
	buf := make([]byte, 4<<10)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	fds := parseRights(oob[:oobn])
	if err == nil && len(fds) != 1 {
		err = fmt.Errorf("frontend: handoff: %d descriptors, want 1", len(fds))
	}
	if err == nil && n < 4 {
		_, err = io.ReadFull(uc, buf[n:4])
		n = 4
	}
	if err != nil {
		closeFDs(fds)
		return nil, err
	}
	size := int(binary.BigEndian.Uint32(buf))
	if size > maxHandoffPrefix {
		closeFDs(fds)
		return nil, fmt.Errorf("frontend: handoff: prefix of %d bytes", size)
	}
	prefix := make([]byte, size)
	got := copy(prefix, buf[4:n])
	if _, err := io.ReadFull(uc, prefix[got:]); err != nil {
		closeFDs(fds)
		return nil, err
	}
	f := os.NewFile(uintptr(fds[0]), "handoff")
	c, err := net.FileConn(f) // dups the descriptor
	f.Close()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("frontend: handoff: %T is not a TCP connection", c)
	}
	return &handoffConn{TCPConn: tc, prefix: prefix}, nil
}

func parseRights(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if r, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}

// Accept returns the next handed-off connection.
func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, removes the socket file and waits for handoffs
// being received; it is idempotent.
func (l *handoffListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.ln.Close()
		l.wg.Wait()
	})
	return err
}

// Addr returns the Unix socket's address.
func (l *handoffListener) Addr() net.Addr { return l.ln.Addr() }

// handoffConn is a handed-off client connection: reads yield the prefix
// the front end sent first. ReadFrom (sendfile) comes from the TCPConn.
type handoffConn struct {
	*net.TCPConn
	prefix  []byte
	reports *handoffReports // nil: nobody to report to
}

// Close closes the connection, then the reports' Unix connection (the
// front end then ends what was in flight).
func (c *handoffConn) Close() error {
	err := c.TCPConn.Close()
	if c.reports != nil {
		c.reports.close()
	}
	return err
}

// handoffReports writes a handed-off connection's reports to the front
// end. A write that fails stops the reports (the front end is gone or
// stuck: the requests are served all the same).
type handoffReports struct {
	mu     sync.Mutex
	uc     *net.UnixConn
	buf    []byte
	broken bool
}

func (r *handoffReports) send(kind byte, key string, size int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.broken {
		return
	}
	b := append(r.buf[:0], kind)
	if kind == reportBegin {
		if len(key) > maxReportKey {
			key = key[:maxReportKey]
		}
		b = binary.AppendUvarint(b, uint64(len(key)))
		b = append(b, key...)
	} else {
		b = binary.AppendUvarint(b, uint64(max(size, 0)))
	}
	r.buf = b
	if err := r.uc.SetWriteDeadline(time.Now().Add(handoffTimeout)); err != nil {
		r.broken = true
		return
	}
	if _, err := r.uc.Write(b); err != nil {
		r.broken = true
	}
}

func (r *handoffReports) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.broken = true
	_ = r.uc.Close()
}

type handoffConnKey struct{}

// HandoffConnContext is an http.Server ConnContext for the server of a
// ListenHandoff listener: it marks the requests of a handed-off
// connection for ReportHandoffs.
func HandoffConnContext(ctx context.Context, c net.Conn) context.Context {
	if hc, ok := c.(*handoffConn); ok && hc.reports != nil {
		return context.WithValue(ctx, handoffConnKey{}, hc.reports)
	}
	return ctx
}

// ReportHandoffs wraps a back end's handler: a request on a handed-off
// connection (marked by HandoffConnContext) is reported to the front end
// when it begins and when it ends, with the size of its response (see
// the wire format above). Other requests pass through untouched.
func ReportHandoffs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep, _ := r.Context().Value(handoffConnKey{}).(*handoffReports)
		if rep == nil {
			next.ServeHTTP(w, r)
			return
		}
		rep.send(reportBegin, RequestKey(r.URL, true), 0)
		cw := probe.NewCountingWriter(w)
		// Deferred: a handler that aborts (http.ErrAbortHandler) ends too.
		defer func() { rep.send(reportEnd, "", responseSize(cw)) }()
		next.ServeHTTP(cw, r)
	})
}

// Read reads the prefix, then the connection.
func (c *handoffConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.TCPConn.Read(p)
}

// WriteTo writes the prefix, then what the connection reads, to w.
func (c *handoffConn) WriteTo(w io.Writer) (int64, error) {
	var n int64
	if len(c.prefix) > 0 {
		m, err := w.Write(c.prefix)
		n += int64(m)
		c.prefix = c.prefix[m:]
		if err != nil {
			return n, err
		}
	}
	m, err := c.TCPConn.WriteTo(w)
	return n + m, err
}
