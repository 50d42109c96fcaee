package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// rebindDNS serves, on 127.0.0.1, an A record of 127.0.0.1 for every
// name: a public-looking host name that resolves to a private address.
// It returns a resolver that asks only it.
func rebindDNS(t *testing.T) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if q.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A: net.IPv4(127, 0, 0, 1)})
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", addr)
	}}
}

// TestProbePublicOnly: a probe of a PublicOnly member connects only to an
// address that ClientOptions.Public accepts, checked after the host name
// is resolved, and never over a connection that another probe made;
// other probes with the same client are not limited.
func TestProbePublicOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(goodJSON)) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	client := NewClient(ClientOptions{Resolver: rebindDNS(t), Public: func(a netip.Addr) string {
		if a.IsLoopback() {
			return "is loopback"
		}
		return ""
	}})
	tests := []struct {
		name       string
		target     string
		publicOnly bool
		refused    bool
	}{
		{"an IP address, public only", srv.URL + "/v1/load", true, true},
		{"a host name resolving to loopback, public only", "http://rebind.example.test:" + port + "/v1/load", true, true},
		{"the same host name, not limited", "http://rebind.example.test:" + port + "/v1/load", false, false},
		{"an IP address, not limited", srv.URL + "/v1/load", false, false},
		// The connections of the probes above are idle in the pool now.
		{"the host name again, public only: no pooled connection reused", "http://rebind.example.test:" + port + "/v1/load", true, true},
		{"the IP address again, public only", srv.URL + "/v1/load", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if tt.publicOnly {
				ctx = context.WithValue(ctx, publicOnlyKey{}, true)
			}
			res := ProbeLoad(ctx, client, tt.target, nil)
			if tt.refused {
				if res.Success || res.Reason != ReasonConnect || !errors.Is(res.Err, ErrNotPublic) ||
					!strings.Contains(res.Err.Error(), "127.0.0.1 is loopback") {
					t.Fatalf("success=%v reason=%q err=%v; want a connect failure for 127.0.0.1 being loopback", res.Success, res.Reason, res.Err)
				}
				return
			}
			if !res.Success {
				t.Fatalf("reason %q err %v, want success", res.Reason, res.Err)
			}
		})
	}
}
