package proxyprotocol

import (
	"errors"
	"net"
	"sync"
)

// Listener is a net.Listener whose Accept returns a trusted peer's
// connection once its header has been read (closing and counting those
// without a good one) and any other peer's at once, as it is. One
// goroutine accepts, and one per trusted connection reads its header
// under Options.HeaderTimeout, so that a slow peer blocks only itself.
type Listener struct {
	inner net.Listener
	o     Options

	start sync.Once
	ready chan accepted // unbuffered: the accept loop goes at Accept's pace
	done  chan struct{}
	stop  sync.Once
}

var _ net.Listener = (*Listener)(nil)

// accepted is what Accept returns next.
type accepted struct {
	c   net.Conn
	err error
}

func newListener(ln net.Listener, o Options) *Listener {
	return &Listener{inner: ln, o: o, ready: make(chan accepted), done: make(chan struct{})}
}

// Accept waits for the next connection to serve. Its errors are the inner
// listener's, and net.ErrClosed once Close was called.
func (l *Listener) Accept() (net.Conn, error) {
	l.start.Do(func() { go l.acceptLoop() })
	select {
	case a := <-l.ready:
		return a.c, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// acceptLoop accepts until the inner listener is closed, passing on its
// errors (a temporary one is retried at the pace of Accept's caller);
// once it ends, Accept returns net.ErrClosed.
func (l *Listener) acceptLoop() {
	defer l.stop.Do(func() { close(l.done) })
	for {
		c, err := l.inner.Accept()
		switch {
		case err != nil:
			if !l.deliver(accepted{err: err}) || errors.Is(err, net.ErrClosed) {
				return
			}
		case l.o.trusted(c.RemoteAddr()):
			go l.handshake(c)
		default:
			if !l.deliver(accepted{c: &untrustedConn{Conn: c, count: l.o.Count}}) {
				c.Close()
				return
			}
		}
	}
}

// handshake reads a trusted connection's header and passes it on, or
// closes it.
func (l *Listener) handshake(c net.Conn) {
	pc, result := readHeader(c, l.o.HeaderTimeout)
	l.o.Count(result)
	if pc == nil {
		c.Close()
		return
	}
	if !l.deliver(accepted{c: pc}) {
		pc.Close()
	}
}

// deliver hands a to Accept; false when the listener was closed first.
func (l *Listener) deliver(a accepted) bool {
	select {
	case l.ready <- a:
		return true
	case <-l.done:
		return false
	}
}

// Close closes the listener; connections whose header is still being
// read are closed when it arrives or times out.
func (l *Listener) Close() error {
	l.stop.Do(func() { close(l.done) })
	return l.inner.Close()
}

// Addr returns the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }
