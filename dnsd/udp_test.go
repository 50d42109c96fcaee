package dnsd

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"
)

// TestUDPWildcardSource: a socket bound to a wildcard address answers
// from the address each query was sent to (a client's connected socket
// takes nothing else), for IPv4, IPv6 and IPv4 clients of a dual-stack
// socket, on the batch path and on the path for IPv4-mapped clients.
func TestUDPWildcardSource(t *testing.T) {
	v6 := true
	if pc, err := net.ListenPacket("udp6", "[::1]:0"); err != nil {
		v6 = false
	} else {
		pc.Close()
	}
	for _, c := range []struct {
		name, network, listen string
		dial                  []string
		needV6                bool
	}{
		{"ipv4 wildcard", "udp4", "0.0.0.0:0", []string{"127.0.0.1", "127.0.0.2"}, false},
		{"ipv4 address", "udp4", "127.0.0.1:0", []string{"127.0.0.1"}, false},
		{"dual-stack, ipv4 clients", "udp", ":0", []string{"127.0.0.1", "127.0.0.2"}, true},
		{"dual-stack, ipv6 client", "udp", ":0", []string{"::1"}, true},
		{"ipv6 wildcard", "udp6", "[::]:0", []string{"::1"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.needV6 && !v6 {
				t.Skip("no IPv6 loopback")
			}
			s, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Load(testSet(t, nil)); err != nil {
				t.Fatal(err)
			}
			pc, err := net.ListenPacket(c.network, c.listen)
			if err != nil {
				t.Fatal(err)
			}
			port := pc.LocalAddr().(*net.UDPAddr).Port
			ctx, cancel := context.WithCancel(context.Background())
			var g errgroup.Group
			g.Go(func() error { return s.ServeUDP(ctx, pc) })
			defer func() {
				cancel()
				if err := g.Wait(); err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
			cl := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
			for _, host := range c.dial {
				for _, q := range []struct {
					name  string
					qtype uint16
				}{{"static.example.org.", dns.TypeA}, {"nothere.example.org.", dns.TypeA}} { // fast and slow path
					m := new(dns.Msg)
					m.SetQuestion(q.name, q.qtype)
					r, _, err := cl.Exchange(m, net.JoinHostPort(host, strconv.Itoa(port)))
					if err != nil {
						t.Fatalf("%s via %s: %v", q.name, host, err)
					}
					if r.Id != m.Id || !r.Authoritative {
						t.Fatalf("%s via %s: reply %v", q.name, host, r)
					}
				}
			}
		})
	}
}
