package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// socketPair is one DNS listen address: its UDP sockets (one per read
// loop, all bound to the same port with SO_REUSEPORT) and a TCP listener
// on the same port.
type socketPair struct {
	pcs []net.PacketConn
	ln  net.Listener
}

func (s socketPair) close() {
	for _, pc := range s.pcs {
		pc.Close()
	}
	if s.ln != nil {
		s.ln.Close()
	}
}

// udpSockets is how many UDP sockets each listen address gets for the
// udp_sockets setting n: n, or one per CPU the process may use for 0.
func udpSockets(n int) int {
	if n > 0 {
		return n
	}
	return max(1, runtime.GOMAXPROCS(0))
}

// reusePort sets SO_REUSEPORT, so that several sockets bind one port and
// the kernel spreads the clients over them (by a hash of their address).
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// listenPair binds n UDP sockets and a TCP listener on addr. With port 0
// the kernel picks the UDP port and the others are bound to the same one;
// if another process holds that TCP port, it tries again with a new UDP
// port.
func listenPair(addr string, n int) (socketPair, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return socketPair{}, fmt.Errorf("dnsd: listen %q: %w", addr, err)
	}
	lc := net.ListenConfig{}
	if n > 1 {
		lc.Control = reusePort
	}
	ctx := context.Background()
	for try := 0; try < 20; try++ {
		first, err := lc.ListenPacket(ctx, "udp", addr)
		if err != nil {
			return socketPair{}, fmt.Errorf("dnsd: listen udp %s: %w", addr, err)
		}
		sp := socketPair{pcs: []net.PacketConn{first}}
		bound := net.JoinHostPort(host, strconv.Itoa(first.LocalAddr().(*net.UDPAddr).Port))
		for len(sp.pcs) < n {
			pc, err := lc.ListenPacket(ctx, "udp", bound)
			if err != nil {
				sp.close()
				return socketPair{}, fmt.Errorf("dnsd: listen udp %s (socket %d of %d): %w", bound, len(sp.pcs)+1, n, err)
			}
			sp.pcs = append(sp.pcs, pc)
		}
		sp.ln, err = net.Listen("tcp", bound)
		if err == nil {
			return sp, nil
		}
		sp.close()
		if port != "0" || !errors.Is(err, syscall.EADDRINUSE) {
			return socketPair{}, fmt.Errorf("dnsd: listen tcp %s: %w", addr, err)
		}
	}
	return socketPair{}, fmt.Errorf("dnsd: listen %s: no port free for both UDP and TCP", addr)
}
