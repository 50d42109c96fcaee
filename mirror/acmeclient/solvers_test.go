package acmeclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/acme"
)

// content stands for what the mirror serves behind the challenges: it
// counts the requests that reach it.
type content struct{ hits atomic.Int32 }

func (c *content) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c.hits.Add(1)
	io.WriteString(w, "content\n")
}

// alpnServer is an HTTPS server of the TLS config of s over base (whose
// certificate it presents to other clients), serving h.
func alpnServer(t *testing.T, s *TLSALPN01, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = s.ServerConfig(&tls.Config{NextProtos: []string{"http/1.1"}})
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestOrderChallenges runs an order through each challenge type against
// the fake CA, which validates HTTP-01 by a GET of the mirror's handler
// and TLS-ALPN-01 by a handshake on acme-tls/1: the certificate is
// issued, the answers are gone afterwards, and neither the CA's GET nor
// its handshake reached the content. A CA that does not offer the type
// fails the order, naming it.
func TestOrderChallenges(t *testing.T) {
	names := []string{"fra1.example.org", "fra1-alt.example.org"}
	tests := []struct {
		name, challenge string
		offer           []string
		wantErr         string
	}{
		{"dns-01", ChallengeDNS01, []string{ChallengeHTTP01, ChallengeDNS01}, ""},
		{"http-01", ChallengeHTTP01, []string{ChallengeDNS01, ChallengeHTTP01, ChallengeTLSALPN01}, ""},
		{"tls-alpn-01", ChallengeTLSALPN01, []string{ChallengeTLSALPN01}, ""},
		{"http-01 not offered", ChallengeHTTP01, []string{ChallengeDNS01, ChallengeTLSALPN01}, "the CA offers no http-01 challenge"},
		{"tls-alpn-01 not offered", ChallengeTLSALPN01, []string{ChallengeDNS01}, "the CA offers no tls-alpn-01 challenge"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, web := &recordingSolver{}, &content{}
			ca := newFakeCA(t, rec)
			ca.offer = tt.offer
			var solver Solver = rec
			left := func() int { live, _, _ := rec.counts(); return live }
			switch tt.challenge {
			case ChallengeHTTP01:
				s := &HTTP01{}
				solver, left, ca.http = s, s.Len, s.Wrap(web)
			case ChallengeTLSALPN01:
				s := &TLSALPN01{}
				solver, left, ca.alpnAddr = s, s.Len, alpnServer(t, s, web).Listener.Addr().String()
			}
			var installed *tls.Certificate
			m, err := New(Options{Directory: ca.url("/dir"), HTTP: ca.srv.Client(), Dir: t.TempDir(), Names: names,
				Challenge: tt.challenge, Solver: solver, Install: func(c *tls.Certificate) { installed = c }})
			if err != nil {
				t.Fatal(err)
			}
			err = m.renew(context.Background())
			if n := left(); n != 0 {
				t.Errorf("%d answers left after the order", n)
			}
			if n := web.hits.Load(); n != 0 {
				t.Errorf("the content got %d requests", n)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("renew = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || installed == nil || !usable(installed.Leaf, names, time.Now()) {
				t.Fatalf("renew = %v, installed %v", err, installed != nil)
			}
		})
	}
}

// TestNewChallenge: the challenge type defaults to dns-01; an unknown one
// is refused.
func TestNewChallenge(t *testing.T) {
	for _, tt := range []struct{ name, challenge, want string }{
		{"default", "", ""}, {"tls-alpn-01", ChallengeTLSALPN01, ""}, {"unknown", "dns-02", `challenge "dns-02"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(Options{Directory: "https://ca.invalid/dir", Dir: t.TempDir(), Names: []string{"fra1.example.org"},
				Challenge: tt.challenge, Solver: &nopSolver{}, Install: func(*tls.Certificate) {}})
			switch {
			case tt.want == "" && err != nil:
				t.Fatal(err)
			case tt.want == "" && m.o.Challenge == "":
				t.Fatal("no challenge type after the defaults")
			case tt.want != "" && (err == nil || !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New = %v, want ErrOptions naming %s", err, tt.want)
			}
		})
	}
}

// TestHTTP01Wrap: the CA's requests under /.well-known/acme-challenge/
// on a plain connection, for any Host, are answered and never reach the
// content; everything else does; a removed token is no longer answered.
func TestHTTP01Wrap(t *testing.T) {
	s := &HTTP01{}
	ch := Challenge{Type: ChallengeHTTP01, Name: "fra1.example.org", Token: "tok-1", Value: "tok-1.thumb"}
	if err := s.Publish(context.Background(), ch); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, url string
		tls               bool
		code              int
		body              string // "" any
		content           bool   // reaches the content
	}{
		{"published", http.MethodGet, "http://fra1.example.org/.well-known/acme-challenge/tok-1", false, 200, "tok-1.thumb", false},
		{"any host", http.MethodGet, "http://203.0.113.7:8080/.well-known/acme-challenge/tok-1", false, 200, "tok-1.thumb", false},
		{"head", http.MethodHead, "http://fra1.example.org/.well-known/acme-challenge/tok-1", false, 200, "", false},
		{"unknown token", http.MethodGet, "http://fra1.example.org/.well-known/acme-challenge/tok-2", false, 404, "", false},
		{"post", http.MethodPost, "http://fra1.example.org/.well-known/acme-challenge/tok-1", false, 405, "", false},
		{"over https", http.MethodGet, "https://fra1.example.org/.well-known/acme-challenge/tok-1", true, 200, "content\n", true},
		{"content", http.MethodGet, "http://fra1.example.org/debian/README", false, 200, "content\n", true},
		{"the folder itself", http.MethodGet, "http://fra1.example.org/.well-known/acme-challenge", false, 200, "content\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			web := &content{}
			req := httptest.NewRequest(tt.method, tt.url, nil)
			if !tt.tls {
				req.TLS = nil
			}
			rec := httptest.NewRecorder()
			s.Wrap(web).ServeHTTP(rec, req)
			if rec.Code != tt.code || tt.body != "" && rec.Body.String() != tt.body || (web.hits.Load() > 0) != tt.content {
				t.Errorf("%d %q, content reached %v; want %d %q, %v", rec.Code, rec.Body, web.hits.Load() > 0, tt.code, tt.body, tt.content)
			}
		})
	}
	s.Remove(context.Background(), ch)
	rec := httptest.NewRecorder()
	s.Wrap(&content{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://fra1.example.org/.well-known/acme-challenge/tok-1", nil))
	if rec.Code != http.StatusNotFound || s.Len() != 0 {
		t.Errorf("after Remove: %d, %d tokens; want 404, none", rec.Code, s.Len())
	}
}

// TestTLSALPN01Handshake: a ClientHello with ALPN acme-tls/1 gets the
// challenge certificate of its SNI name, acme-tls/1 negotiated, and its
// connection never reaches the HTTP server; without a challenge for the
// name the handshake fails; an ordinary client gets the base certificate
// and HTTP.
func TestTLSALPN01Handshake(t *testing.T) {
	s, web := &TLSALPN01{}, &content{}
	srv := alpnServer(t, s, web)
	cl := &acme.Client{Key: mustKey(t)}
	cert, err := cl.TLSALPN01ChallengeCert("tok-1", "fra1.example.org")
	if err != nil {
		t.Fatal(err)
	}
	ch := Challenge{Type: ChallengeTLSALPN01, Name: "fra1.example.org", Token: "tok-1", Cert: &cert}
	if err := s.Publish(context.Background(), ch); err != nil {
		t.Fatal(err)
	}
	dial := func(name string, protos ...string) (*tls.Conn, error) {
		return tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{ServerName: name, NextProtos: protos, InsecureSkipVerify: true})
	}
	c, err := dial("FRA1.example.org", acme.ALPNProto)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.ConnectionState(); st.NegotiatedProtocol != acme.ALPNProto || st.PeerCertificates[0].VerifyHostname("fra1.example.org") != nil {
		t.Errorf("negotiated %q, names %q; want acme-tls/1 and the challenge certificate", st.NegotiatedProtocol, st.PeerCertificates[0].DNSNames)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: fra1.example.org\r\n\r\n")
	if b, err := io.ReadAll(c); len(b) != 0 || web.hits.Load() != 0 {
		t.Errorf("an HTTP request on acme-tls/1 got %q (%v), content reached %d times; want the connection closed", b, err, web.hits.Load())
	}
	c.Close()
	if c, err := dial("nyc1.example.org", acme.ALPNProto); err == nil {
		c.Close()
		t.Error("a handshake on acme-tls/1 for a name without a challenge succeeded")
	}
	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil || resp.TLS.NegotiatedProtocol == acme.ALPNProto {
		t.Fatalf("an ordinary client: %v", err)
	}
	resp.Body.Close()
	s.Remove(context.Background(), ch)
	c, err = dial("fra1.example.org", acme.ALPNProto)
	if err == nil {
		c.Close()
	}
	if err == nil || s.Len() != 0 {
		t.Errorf("after Remove: handshake error %v, %d certificates; want an error, none", err, s.Len())
	}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
