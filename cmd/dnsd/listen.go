package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// socketPair is one DNS listen address: a UDP socket and a TCP listener on
// the same port.
type socketPair struct {
	pc net.PacketConn
	ln net.Listener
}

func (s socketPair) close() {
	s.pc.Close()
	s.ln.Close()
}

// listenPair binds UDP and TCP on addr. With port 0 the kernel picks the UDP
// port and TCP is bound to the same one; if another process holds that TCP
// port, it tries again with a new UDP port.
func listenPair(addr string) (socketPair, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return socketPair{}, fmt.Errorf("dnsd: listen %q: %w", addr, err)
	}
	for try := 0; try < 20; try++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return socketPair{}, fmt.Errorf("dnsd: listen udp %s: %w", addr, err)
		}
		p := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			return socketPair{pc: pc, ln: ln}, nil
		}
		pc.Close()
		if port != "0" || !errors.Is(err, syscall.EADDRINUSE) {
			return socketPair{}, fmt.Errorf("dnsd: listen tcp %s: %w", addr, err)
		}
	}
	return socketPair{}, fmt.Errorf("dnsd: listen %s: no port free for both UDP and TCP", addr)
}
