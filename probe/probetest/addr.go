package probetest

import (
	"net"
	"testing"
)

// FreeAddr is the one free-port helper of the tests, for the third-party
// servers (etcd, unbound) that can not report a port they chose
// themselves; our own daemons listen on 127.0.0.1:0 and say where. It
// returns a loopback host:port of network ("tcp" or "udp") that
// was free a moment ago. Another process may take it meanwhile: a caller
// retries on another one when its server can not bind.
func FreeAddr(t testing.TB, network string) string {
	t.Helper()
	switch network {
	case "udp":
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		return pc.LocalAddr().String()
	case "tcp":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	t.Fatalf("probetest: network %q: want tcp or udp", network)
	return ""
}
