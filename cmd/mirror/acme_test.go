package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"golang.org/x/crypto/acme"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/acmeclient"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// acmeDNSD is dnsd's ACME routes as the solver sees them: down answers
// 503 to every publish; it lists names and groups fully qualified, as
// dnsd does.
type acmeDNSD struct {
	down bool
	mu   sync.Mutex
	live []api.ACMELive
	ops  []string // "PUT name", "DELETE name"
}

func (d *acmeDNSD) start(t *testing.T) string {
	mux := http.NewServeMux()
	change := func(w http.ResponseWriter, r *http.Request) {
		var ch api.ACMEChallenge
		json.NewDecoder(r.Body).Decode(&ch)
		d.mu.Lock()
		defer d.mu.Unlock()
		d.ops = append(d.ops, r.Method+" "+ch.Name)
		if d.down {
			http.Error(w, `{"error": "etcd unreachable"}`, http.StatusServiceUnavailable)
			return
		}
		live := api.ACMELive{Group: r.PathValue("group") + ".", Member: r.PathValue("member"), Name: ch.Name + ".", Value: ch.Value}
		if r.Method == http.MethodPut {
			d.live = append(d.live, live)
			json.NewEncoder(w).Encode(ch)
			return
		}
		d.live = slices.DeleteFunc(d.live, func(l api.ACMELive) bool { return l == live })
		json.NewEncoder(w).Encode(api.ACMERemoved{Removed: true})
	}
	mux.HandleFunc(api.PublishChallenge.Pattern(), change)
	mux.HandleFunc(api.RemoveChallenge.Pattern(), change)
	mux.HandleFunc(api.ListChallenges.Pattern(), func(w http.ResponseWriter, _ *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		json.NewEncoder(w).Encode(api.ACMEChallenges{Challenges: d.live})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDNSDSolver: a value goes to the first dnsd that takes it (not to a
// dnsd that refuses it, nor to the ones after), Publish returns once it
// is listed, and Remove goes to the dnsd that took it.
func TestDNSDSolver(t *testing.T) {
	down, up, spare := &acmeDNSD{down: true}, &acmeDNSD{}, &acmeDNSD{}
	cfg := &mirror.Config{Group: "www.example.org", Member: "fra1", Host: "fra1.example.org"}
	cfg.DNSD.URLs = []string{down.start(t), up.start(t), spare.start(t)}
	cfg.DNSD.Secret = testSecret
	s, err := newDNSDSolver(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	const value = "OQ0pNRmE6F5vS0wfYOQzGzC4dy4ZGqK0ddAAtBjV1Dc"
	ctx := context.Background()
	ch := acmeclient.Challenge{Type: acmeclient.ChallengeDNS01, Name: "www.example.org", Token: "tok", Value: value}
	if err := s.Publish(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, ch); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		d    *acmeDNSD
		want []string
	}{
		{"refusing", down, []string{"PUT www.example.org"}},
		{"taking", up, []string{"PUT www.example.org", "DELETE www.example.org"}},
		{"spare", spare, nil},
	} {
		if !slices.Equal(tt.d.ops, tt.want) {
			t.Errorf("%s dnsd: %q, want %q", tt.name, tt.d.ops, tt.want)
		}
	}
	if len(up.live) != 0 {
		t.Errorf("left live: %+v", up.live)
	}
}

// TestACMENames: dns-01 proves the group name and the host name; http-01
// and tls-alpn-01 the host name alone.
func TestACMENames(t *testing.T) {
	for _, tt := range []struct {
		challenge string
		want      []string
	}{
		{mirror.ChallengeDNS01, []string{"www.example.org", "fra1.example.org"}},
		{mirror.ChallengeHTTP01, []string{"fra1.example.org"}},
		{mirror.ChallengeTLSALPN01, []string{"fra1.example.org"}},
	} {
		t.Run(tt.challenge, func(t *testing.T) {
			cfg := &mirror.Config{Group: "www.example.org.", Member: "fra1", Host: "fra1.example.org."}
			cfg.TLS.ACME.Challenge = tt.challenge
			if got := acmeNames(cfg); !slices.Equal(got, tt.want) {
				t.Errorf("acmeNames = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDispatcherACMEChallenges: a dispatcher's public chain answers the
// CA's HTTP-01 request for a published token on its plain listener
// (under any Host, where it would redirect everything else), and its
// HTTPS config presents the TLS-ALPN-01 certificate on acme-tls/1 while
// other clients get the certificate of the files.
func TestDispatcherACMEChallenges(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	cs, err := certs.LoadAll([]certs.Files{pair(ca.LeafFor(t, dir, "www", testGroup))})
	if err != nil {
		t.Fatal(err)
	}
	h01, alpn := &acmeclient.HTTP01{}, &acmeclient.TLSALPN01{}
	m := startMirror(t, newFakeDNSD(t, "a"), "d", "dispatcher: true\n", deps{http01: h01, tlsALPN01: alpn, tls: certs.NewSet(cs)})
	ctx := context.Background()
	if err := h01.Publish(ctx, acmeclient.Challenge{Type: acmeclient.ChallengeHTTP01, Name: "d.mirrors.test", Token: "tok", Value: "tok.thumb"}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + m.addr + "/.well-known/acme-challenge/tok")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "tok.thumb" {
		t.Errorf("HTTP-01: %s %q, want 200 tok.thumb", resp.Status, body)
	}

	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	cert, err := (&acme.Client{Key: key}).TLSALPN01ChallengeCert("tok", "d.mirrors.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := alpn.Publish(ctx, acmeclient.Challenge{Type: acmeclient.ChallengeTLSALPN01, Name: "d.mirrors.test", Token: "tok", Cert: &cert}); err != nil {
		t.Fatal(err)
	}
	conf := m.httpsConfig()
	for _, tt := range []struct {
		name, sni, proto, wantName string
	}{
		{"acme-tls/1", "d.mirrors.test", acme.ALPNProto, "d.mirrors.test"},
		{"h2", testGroup, "h2", testGroup},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() { tls.Server(server, conf).Handshake(); server.Close() }()
			c := tls.Client(client, &tls.Config{ServerName: tt.sni, NextProtos: []string{tt.proto}, InsecureSkipVerify: true})
			if err := c.Handshake(); err != nil {
				t.Fatal(err)
			}
			st := c.ConnectionState()
			if st.NegotiatedProtocol != tt.proto || st.PeerCertificates[0].VerifyHostname(tt.wantName) != nil {
				t.Errorf("negotiated %q, certificate for %q; want %q, %q", st.NegotiatedProtocol, st.PeerCertificates[0].DNSNames, tt.proto, tt.wantName)
			}
		})
	}
}
