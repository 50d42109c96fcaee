package acmeclient

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCA is the part of an RFC 8555 CA that Manager uses, in process:
// directory, nonces, account, order, authorizations that offer the
// challenges of offer and are valid when the one the client accepted is
// answered (invalid for the names in refuse), finalization and the
// chain. It checks no signature. DNS-01 is validated by asking solver,
// HTTP-01 by a GET of the handler http, TLS-ALPN-01 by a handshake with
// the listener at alpnAddr on ALPN acme-tls/1.
type fakeCA struct {
	t        *testing.T
	srv      *httptest.Server
	solver   *recordingSolver
	refuse   map[string]bool
	life     time.Duration // of the certificates issued
	offer    []string      // the challenge types of each authorization (default dns-01)
	http     http.Handler
	alpnAddr string

	mu     sync.Mutex
	thumb  string          // the account key's JWK thumbprint (RFC 7638)
	names  []string        // of the order
	valid  map[string]bool // authorization index → valid
	failed map[string]bool
	key    *ecdsa.PrivateKey
	chain  []byte // PEM, after the finalization
	orders int
}

func newFakeCA(t *testing.T, s *recordingSolver, refuse ...string) *fakeCA {
	ca := &fakeCA{t: t, solver: s, refuse: map[string]bool{}, life: time.Hour, offer: []string{ChallengeDNS01},
		valid: map[string]bool{}, failed: map[string]bool{}}
	for _, n := range refuse {
		ca.refuse[n] = true
	}
	ca.key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca.srv = httptest.NewTLSServer(http.HandlerFunc(ca.serve))
	t.Cleanup(ca.srv.Close)
	return ca
}

func (ca *fakeCA) url(p string) string { return ca.srv.URL + p }

func (ca *fakeCA) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Replay-Nonce", fmt.Sprint("n", time.Now().UnixNano()))
	if r.URL.Path == "/dir" {
		ca.json(w, http.StatusOK, map[string]string{"newNonce": ca.url("/nonce"), "newAccount": ca.url("/account"), "newOrder": ca.url("/order")})
		return
	}
	if r.URL.Path == "/nonce" {
		return
	}
	var jws struct{ Protected, Payload string }
	if err := json.NewDecoder(r.Body).Decode(&jws); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	payload, _ := base64.RawURLEncoding.DecodeString(jws.Payload)
	ca.mu.Lock()
	defer ca.mu.Unlock()
	switch p := r.URL.Path; {
	case p == "/account":
		ca.account(jws.Protected)
		w.Header().Set("Location", ca.url("/acct/1"))
		ca.json(w, http.StatusCreated, map[string]string{"status": "valid"})
	case p == "/order":
		ca.newOrder(w, payload)
	case p == "/order/1":
		ca.order(w, http.StatusOK)
	case strings.HasPrefix(p, "/authz/"):
		ca.authz(w, strings.TrimPrefix(p, "/authz/"))
	case strings.HasPrefix(p, "/chal/"):
		ca.challenge(w, strings.TrimPrefix(p, "/chal/"))
	case p == "/finalize/1":
		ca.finalize(w, payload)
	case p == "/cert/1":
		w.Header().Set("Content-Type", "application/pem-certificate-chain")
		w.Write(ca.chain)
	default:
		http.NotFound(w, r)
	}
}

func (ca *fakeCA) json(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// account keeps the thumbprint of the JWK in the protected header.
func (ca *fakeCA) account(protected string) {
	b, _ := base64.RawURLEncoding.DecodeString(protected)
	var h struct{ JWK struct{ Crv, X, Y string } }
	json.Unmarshal(b, &h)
	sum := sha256.Sum256(fmt.Appendf(nil, `{"crv":"%s","kty":"EC","x":"%s","y":"%s"}`, h.JWK.Crv, h.JWK.X, h.JWK.Y))
	ca.thumb = base64.RawURLEncoding.EncodeToString(sum[:])
}

func (ca *fakeCA) newOrder(w http.ResponseWriter, payload []byte) {
	var o struct{ Identifiers []struct{ Value string } }
	json.Unmarshal(payload, &o)
	ca.names, ca.valid, ca.failed, ca.chain = nil, map[string]bool{}, map[string]bool{}, nil
	for _, id := range o.Identifiers {
		ca.names = append(ca.names, id.Value)
	}
	ca.orders++
	ca.order(w, http.StatusCreated)
}

func (ca *fakeCA) order(w http.ResponseWriter, code int) {
	status, authz := "pending", []string{}
	if len(ca.valid) == len(ca.names) {
		status = "ready"
	}
	if ca.chain != nil {
		status = "valid"
	}
	for i := range ca.names {
		authz = append(authz, ca.url(fmt.Sprint("/authz/", i)))
	}
	w.Header().Set("Location", ca.url("/order/1"))
	ca.json(w, code, map[string]any{"status": status, "authorizations": authz, "finalize": ca.url("/finalize/1"), "certificate": ca.url("/cert/1")})
}

func (ca *fakeCA) authz(w http.ResponseWriter, i string) {
	var n int
	fmt.Sscan(i, &n)
	status := "pending"
	switch {
	case ca.valid[i]:
		status = "valid"
	case ca.failed[i]:
		status = "invalid"
	}
	var chals []map[string]string
	for _, typ := range ca.offer {
		chals = append(chals, map[string]string{"type": typ, "url": ca.url("/chal/" + typ + "/" + i), "token": "token" + i, "status": status})
	}
	ca.json(w, http.StatusOK, map[string]any{"status": status, "identifier": map[string]string{"type": "dns", "value": ca.names[n]},
		"challenges": chals})
}

// challenge validates the challenge at typ/i at once, by the key
// authorization (RFC 8555 §8.1).
func (ca *fakeCA) challenge(w http.ResponseWriter, typAndI string) {
	typ, i, _ := strings.Cut(typAndI, "/")
	var n int
	fmt.Sscan(i, &n)
	token := "token" + i
	if ca.answered(typ, ca.names[n], token, token+"."+ca.thumb) && !ca.refuse[ca.names[n]] {
		ca.valid[i] = true
	} else {
		ca.failed[i] = true
	}
	ca.json(w, http.StatusOK, map[string]string{"type": typ, "url": ca.url("/chal/" + typAndI), "token": token, "status": "processing"})
}

// answered reports whether the challenge of typ for name is answered
// with keyAuth.
func (ca *fakeCA) answered(typ, name, token, keyAuth string) bool {
	sum := sha256.Sum256([]byte(keyAuth))
	switch typ {
	case ChallengeDNS01:
		return ca.solver.serves(name, base64.RawURLEncoding.EncodeToString(sum[:]))
	case ChallengeHTTP01:
		rec := httptest.NewRecorder()
		ca.http.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://"+name+"/.well-known/acme-challenge/"+token, nil))
		return rec.Code == http.StatusOK && rec.Body.String() == keyAuth
	case ChallengeTLSALPN01:
		return ca.alpnAnswered(name, sum[:])
	}
	return false
}

// idPeAcmeIdentifier is the OID of RFC 8737's acmeIdentifier extension.
var idPeAcmeIdentifier = asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 31}

// alpnAnswered dials alpnAddr as RFC 8737 §3 validates: SNI name, ALPN
// acme-tls/1 negotiated, a certificate for name alone with a critical
// acmeIdentifier of digest.
func (ca *fakeCA) alpnAnswered(name string, digest []byte) bool {
	c, err := tls.Dial("tcp", ca.alpnAddr, &tls.Config{ServerName: name, NextProtos: []string{"acme-tls/1"}, InsecureSkipVerify: true})
	if err != nil {
		return false
	}
	defer c.Close()
	st := c.ConnectionState()
	leaf := st.PeerCertificates[0]
	if st.NegotiatedProtocol != "acme-tls/1" || len(leaf.DNSNames) != 1 || leaf.VerifyHostname(name) != nil {
		return false
	}
	for _, e := range leaf.Extensions {
		var got []byte
		if e.Id.Equal(idPeAcmeIdentifier) && e.Critical {
			_, err := asn1.Unmarshal(e.Value, &got)
			return err == nil && bytes.Equal(got, digest)
		}
	}
	return false
}

func (ca *fakeCA) finalize(w http.ResponseWriter, payload []byte) {
	var f struct{ CSR string }
	json.Unmarshal(payload, &f)
	der, _ := base64.RawURLEncoding.DecodeString(f.CSR)
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(ca.orders)), Subject: pkix.Name{CommonName: csr.DNSNames[0]},
		DNSNames: csr.DNSNames, NotBefore: now, NotAfter: now.Add(ca.life)}
	leaf, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, csr.PublicKey, ca.key)
	if err != nil {
		ca.t.Errorf("fake CA: %v", err)
	}
	ca.chain = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf})
	ca.order(w, http.StatusOK)
}

// recordingSolver keeps what is published, and counts.
type recordingSolver struct {
	mu                 sync.Mutex
	live               map[string]string
	published, removed int
}

func (s *recordingSolver) Publish(_ context.Context, ch Challenge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[string]string{}
	}
	s.live[ch.Name], s.published = ch.Value, s.published+1
	return nil
}

func (s *recordingSolver) Remove(_ context.Context, ch Challenge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[ch.Name] == ch.Value {
		delete(s.live, ch.Name)
	}
	s.removed++
	return nil
}

func (s *recordingSolver) serves(name, value string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[name] == value
}

func (s *recordingSolver) counts() (live, published, removed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live), s.published, s.removed
}
