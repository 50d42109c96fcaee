package acmeclient

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// http01Prefix is where the CA asks for an HTTP-01 answer (RFC 8555 §8.3).
const http01Prefix = "/.well-known/acme-challenge/"

// HTTP01 is the Solver of HTTP-01: a table of token → key authorization
// that Wrap serves on the plain HTTP listeners. Its zero value is ready.
type HTTP01 struct {
	mu     sync.Mutex
	tokens map[string]string
}

var _ Solver = (*HTTP01)(nil)

// Publish answers ch.Token with ch.Value from now on.
func (s *HTTP01) Publish(_ context.Context, ch Challenge) error {
	if ch.Type != ChallengeHTTP01 || ch.Token == "" || strings.Contains(ch.Token, "/") {
		return fmt.Errorf("%w: http-01 solver: challenge %s %q", ErrOptions, ch.Type, ch.Token)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		s.tokens = make(map[string]string)
	}
	s.tokens[ch.Token] = ch.Value
	return nil
}

// Remove stops answering ch.Token.
func (s *HTTP01) Remove(_ context.Context, ch Challenge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, ch.Token)
	return nil
}

// Len is the number of tokens answered.
func (s *HTTP01) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}

// Wrap returns next behind the HTTP-01 answers. A request on a plain
// connection (r.TLS nil) for /.well-known/acme-challenge/TOKEN, under
// any Host, is the CA's: GET and HEAD of a published token get its key
// authorization (200, text/plain), anything else there 404 (405 for
// another method), and none of them reaches next (no redirect to another
// member, which the CA would follow). Every other request goes to next.
func (s *HTTP01) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.URL.Path, http01Prefix)
		if !ok || r.TLS != nil {
			next.ServeHTTP(w, r)
			return
		}
		s.serve(w, r, token)
	})
}

// serve answers the CA's request for token.
func (s *HTTP01) serve(w http.ResponseWriter, r *http.Request, token string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	s.mu.Lock()
	value, ok := s.tokens[token]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(value))
}
