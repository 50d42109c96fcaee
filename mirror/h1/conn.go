package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// ErrNoResponse is a request whose connection ended before any byte of
// a response came back: on a reused connection the back end may have
// closed it while it was idle, and the request can be sent again on a new
// one.
var ErrNoResponse = errors.New("h1: connection closed before a response")

// Defaults of a Pool.
const (
	DefaultMaxIdle     = 256
	DefaultIdleTimeout = 90 * time.Second
	DefaultDialTimeout = 5 * time.Second
	// readBufferSize is a connection's read buffer: a 4 KiB response
	// comes in one read with its head.
	readBufferSize = 32 << 10
)

// PoolOptions configure a Pool; zero fields take the defaults.
type PoolOptions struct {
	MaxIdle     int           // idle connections kept
	IdleTimeout time.Duration // an idle connection older than this is closed, not used
	DialTimeout time.Duration
	Now         func() time.Time
}

// Pool is the keep-alive connections to one back end (a TCP host:port):
// those idle, last in first out, so that the warmest is used.
type Pool struct {
	addr string
	o    PoolOptions
	dial net.Dialer

	bufs sync.Pool // *[]byte of copyBufferSize: copying bodies

	mu     sync.Mutex
	idle   []*Conn
	closed bool
}

// copyBufferSize is the buffer a body larger than a read is copied with.
const copyBufferSize = 64 << 10

// buffer returns a copy buffer (give it back to p.bufs).
func (p *Pool) buffer() *[]byte {
	if b, ok := p.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, copyBufferSize)
	return &b
}

// NewPool returns the pool of connections to addr.
func NewPool(addr string, o PoolOptions) *Pool {
	if o.MaxIdle <= 0 {
		o.MaxIdle = DefaultMaxIdle
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Pool{addr: addr, o: o, dial: net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}}
}

// Get returns an idle connection (Reused) or a new one.
func (p *Pool) Get(ctx context.Context) (*Conn, error) {
	if c := p.takeIdle(); c != nil {
		return c, nil
	}
	nc, err := p.dial.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{p: p, nc: nc}
	c.br = bufio.NewReaderSize(connSource{c}, readBufferSize)
	c.abort = c.Abort
	return c, nil
}

// takeIdle pops the warmest idle connection that is not too old.
func (p *Pool) takeIdle() *Conn {
	now := p.o.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := len(p.idle); n > 0; n = len(p.idle) {
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		if now.Sub(c.idleSince) < p.o.IdleTimeout {
			c.Reused = true
			return c
		}
		go c.nc.Close() // not under the lock
	}
	return nil
}

// put keeps c idle, or closes it when the pool is full or closed.
func (p *Pool) put(c *Conn) {
	c.idleSince = p.o.Now()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.o.MaxIdle {
		p.mu.Unlock()
		c.nc.Close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// Close closes the idle connections and every one given back later.
func (p *Pool) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
}

// Idle returns the number of idle connections.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// Conn is one connection to a back end, carrying one request at a time:
// Do, then the Body, then Release (or Close).
type Conn struct {
	// Reused is set on a connection that carried a request before.
	Reused bool

	p         *Pool
	nc        net.Conn
	br        *bufio.Reader
	abort     func() // Abort, made once
	idleSince time.Time
	resp      Response
	body      Body
	// The response head's deadline is armed at most once per timeout/16
	// (a back end then has between 15/16 of the timeout and all of it),
	// and lifted only when a body read must read the socket (a small
	// response comes whole with its head).
	headAt time.Time // when the deadline in force was armed; zero: none is
	inBody bool      // the head is read
}

// connSource is what the connection's reader reads: the socket, the
// head's deadline lifted before a read of the body.
type connSource struct{ c *Conn }

func (s connSource) Read(p []byte) (int, error) {
	s.c.liftHeadDeadline()
	return s.c.nc.Read(p)
}

// armHeadDeadline bounds the wait for a response head by timeout.
func (c *Conn) armHeadDeadline(timeout time.Duration) {
	now := time.Now()
	if !c.headAt.IsZero() && now.Sub(c.headAt) < timeout/16 {
		return
	}
	_ = c.nc.SetReadDeadline(now.Add(timeout))
	c.headAt = now
}

// liftHeadDeadline lifts the head's deadline for a read of the body.
func (c *Conn) liftHeadDeadline() {
	if c.inBody {
		c.clearHeadDeadline()
	}
}

func (c *Conn) clearHeadDeadline() {
	if !c.headAt.IsZero() {
		_ = c.nc.SetReadDeadline(time.Time{})
		c.headAt = time.Time{}
	}
}

// Do writes req, a complete request head (ending with its blank line)
// for a request without a body, in one write, and reads the response
// head, waiting at most timeout (0: no bound); head is a HEAD request,
// whose response has no body. The Response and the Body are valid until
// Release or Close.
func (c *Conn) Do(req []byte, head bool, timeout time.Duration) (*Response, error) {
	c.inBody = false
	if _, err := c.nc.Write(req); err != nil {
		return nil, c.noResponse(err)
	}
	if timeout > 0 {
		c.armHeadDeadline(timeout)
	} else {
		c.clearHeadDeadline() // an earlier Do's
	}
	if _, err := c.br.Peek(1); err != nil {
		return nil, c.noResponse(err)
	}
	if err := readHead(c.br, &c.resp); err != nil {
		return nil, err
	}
	c.inBody = true
	if c.resp.Status == 101 {
		return nil, fmt.Errorf("%w: 101 Switching Protocols to a request without Upgrade", ErrHead)
	}
	c.body.reset(c, &c.resp, head)
	return &c.resp, nil
}

// noResponse is err of a request that got nothing back: ErrNoResponse
// when the connection was closed (it may be retried), err otherwise.
func (c *Conn) noResponse(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: %w", ErrNoResponse, err)
	}
	return err
}

// Body is the body of the response Do read.
func (c *Conn) Body() *Body { return &c.body }

// Abort makes a Do or a body read in progress fail at once (the client
// left); the connection is closed at Release.
// AbortFunc is Abort as a func value made once per connection, for
// hooks that would otherwise allocate one per request.
func (c *Conn) AbortFunc() func() { return c.abort }

func (c *Conn) Abort() {
	c.body.aborted.Store(true)
	_ = c.nc.SetDeadline(time.Unix(1, 0))
}

// Release gives the connection back to its pool when its response was
// read whole and it may carry another request; otherwise it closes it.
func (c *Conn) Release() {
	if c.body.reusable() {
		c.p.put(c)
		return
	}
	c.nc.Close()
}

// Close closes the connection.
func (c *Conn) Close() { c.nc.Close() }

// broken reports whether the back end closed or reset the connection:
// a read that does not wait says so (a working one times out or has
// bytes). It is asked after a failed relay, before the close.
func (c *Conn) broken() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Millisecond))
	var one [1]byte
	n, err := c.nc.Read(one[:])
	var ne net.Error
	return n == 0 && !(errors.As(err, &ne) && ne.Timeout())
}

// RemoteAddr is the back end's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }
