package main

import (
	"net"
	"testing"
)

// TestListenPair: n UDP sockets share one port (SO_REUSEPORT) with the
// TCP listener, also when the kernel picks the port.
func TestListenPair(t *testing.T) {
	for _, n := range []int{1, 3} {
		sp, err := listenPair("127.0.0.1:0", n)
		if err != nil {
			t.Fatal(err)
		}
		if len(sp.pcs) != n {
			t.Fatalf("%d UDP sockets, want %d", len(sp.pcs), n)
		}
		port := sp.ln.Addr().(*net.TCPAddr).Port
		for i, pc := range sp.pcs {
			if p := pc.LocalAddr().(*net.UDPAddr).Port; p != port {
				t.Errorf("socket %d on port %d, TCP on %d", i, p, port)
			}
		}
		sp.close()
	}
	if n := udpSockets(0); n < 1 {
		t.Errorf("udpSockets(0) = %d", n)
	}
	if n := udpSockets(4); n != 4 {
		t.Errorf("udpSockets(4) = %d", n)
	}
}
