package api

import (
	"container/heap"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SignatureHeader is the request header that carries a signature.
const SignatureHeader = "Authorization"

// SignatureScheme is the authorization scheme of a signature.
const SignatureScheme = "TM-HMAC-SHA256"

// nonceLine is the first line of the string to sign of a signature with a
// nonce; a signature without one (the first version of the scheme) starts
// with SignatureScheme, so that no string to sign of one version is one of
// the other.
const nonceLine = SignatureScheme + "-NONCE"

// DefaultSignatureWindow is how far a signature's timestamp may be from the
// verifier's clock, in either direction, by default.
const DefaultSignatureWindow = 30 * time.Second

// DefaultReplayEntries is a Verifier's default bound on remembered signatures.
const DefaultReplayEntries = 65536

// NonceBytes is the number of random bytes in the nonces that Sign draws.
const NonceBytes = 16

// Bounds of a nonce, in bytes before encoding, that Verify accepts.
const (
	MinNonceBytes = 16
	MaxNonceBytes = 64
)

// stringToSign is what the MAC covers, one item per line: the first line
// (nonceLine with a nonce, else the scheme), the timestamp in Unix
// seconds, the nonce (only when there is one), the method, the request
// URI and the hex SHA-256 of the body.
func stringToSign(ts int64, nonce, method, path string, body []byte) []byte {
	sum := sha256.Sum256(body)
	var b strings.Builder
	b.Grow(len(nonceLine) + len(nonce) + len(method) + len(path) + 2*len(sum) + 32)
	if nonce != "" {
		b.WriteString(nonceLine)
	} else {
		b.WriteString(SignatureScheme)
	}
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(ts, 10))
	b.WriteByte('\n')
	if nonce != "" {
		b.WriteString(nonce)
		b.WriteByte('\n')
	}
	b.WriteString(method)
	b.WriteByte('\n')
	b.WriteString(path)
	b.WriteByte('\n')
	b.WriteString(hex.EncodeToString(sum[:]))
	return []byte(b.String())
}

func mac(secret []byte, ts int64, nonce, method, path string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(stringToSign(ts, nonce, method, path, body))
	return m.Sum(nil)
}

// NewNonce returns a nonce for SignNonce: NonceBytes bytes read from r
// (crypto/rand.Reader when nil), base64url without padding.
func NewNonce(r io.Reader) (string, error) {
	if r == nil {
		r = rand.Reader
	}
	var b [NonceBytes]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("api: nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Sign returns the value of the Authorization header for a request with
// this method, request URI (path and query, as sent) and body at ts, with
// a fresh random nonce (see SignNonce).
func Sign(secret []byte, method, path string, body []byte, ts time.Time) string {
	nonce, _ := NewNonce(nil) // crypto/rand.Read does not fail (it crashes the program instead)
	return SignNonce(secret, method, path, body, ts, nonce)
}

// SignNonce returns the value of the Authorization header for a request
// with this method, request URI (path and query, as sent) and body at ts,
// with nonce (from NewNonce: never reuse one):
// "TM-HMAC-SHA256 ts=<unix seconds>,nonce=<base64url>,sig=<hex HMAC-SHA256>".
// The MAC covers the timestamp and the nonce, so neither can be changed.
// An empty nonce makes a signature of the first version of the scheme,
// without a nonce, which a Verifier accepts only once whatever its nonce:
// two identical requests within a second are then one replayed.
func SignNonce(secret []byte, method, path string, body []byte, ts time.Time, nonce string) string {
	t := ts.Unix()
	h := SignatureScheme + " ts=" + strconv.FormatInt(t, 10)
	if nonce != "" {
		h += ",nonce=" + nonce
	}
	return h + ",sig=" + hex.EncodeToString(mac(secret, t, nonce, method, path, body))
}

// signature is a parsed signature header.
type signature struct {
	ts    int64
	nonce string // "" for the first version of the scheme
	sig   []byte
}

// parseSignature splits a header value made by SignNonce.
func parseSignature(header string) (signature, error) {
	var s signature
	if header == "" {
		return s, ErrNoSignature
	}
	scheme, params, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, SignatureScheme) {
		return s, fmt.Errorf("%w: want scheme %s", ErrMalformedSignature, SignatureScheme)
	}
	var haveTS, haveNonce, haveSig bool
	for _, p := range strings.Split(params, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		switch {
		case !ok:
			return s, fmt.Errorf("%w: parameter %q: want key=value", ErrMalformedSignature, p)
		case k == "ts" && !haveTS:
			haveTS = true
			var err error
			if s.ts, err = strconv.ParseInt(v, 10, 64); err != nil {
				return s, fmt.Errorf("%w: ts %q: want Unix seconds", ErrMalformedSignature, v)
			}
		case k == "nonce" && !haveNonce:
			haveNonce = true
			n, err := base64.RawURLEncoding.Strict().DecodeString(v)
			if err != nil || len(n) < MinNonceBytes || len(n) > MaxNonceBytes {
				return s, fmt.Errorf("%w: nonce: want %d to %d bytes, base64url without padding", ErrMalformedSignature, MinNonceBytes, MaxNonceBytes)
			}
			s.nonce = v
		case k == "sig" && !haveSig:
			haveSig = true
			var err error
			if s.sig, err = hex.DecodeString(v); err != nil || len(s.sig) != sha256.Size {
				return s, fmt.Errorf("%w: sig: want %d hex digits", ErrMalformedSignature, 2*sha256.Size)
			}
		default:
			return s, fmt.Errorf("%w: unexpected or repeated parameter %q", ErrMalformedSignature, k)
		}
	}
	if !haveTS || !haveSig {
		return s, fmt.Errorf("%w: want ts and sig", ErrMalformedSignature)
	}
	return s, nil
}

// Verify checks header, a value made by Sign, for a request with this
// method, request URI and body: the MAC (compared in constant time) and the
// timestamp, which must be within window (DefaultSignatureWindow when
// window <= 0) of now in either direction. It does not detect replays; a
// Verifier does.
func Verify(secret []byte, method, path string, body []byte, header string, now time.Time, window time.Duration) error {
	_, _, err := verify([][]byte{secret}, method, path, body, header, now, window)
	return err
}

// verify is Verify with any of secrets (tried in order); it returns the
// parsed signature and the index of the secret that made it.
func verify(secrets [][]byte, method, path string, body []byte, header string, now time.Time, window time.Duration) (signature, int, error) {
	if window <= 0 {
		window = DefaultSignatureWindow
	}
	s, err := parseSignature(header)
	if err != nil {
		return s, -1, err
	}
	which := -1
	for i, secret := range secrets {
		if len(secret) > 0 && hmac.Equal(s.sig, mac(secret, s.ts, s.nonce, method, path, body)) {
			which = i
			break
		}
	}
	if which < 0 {
		return s, -1, ErrBadSignature
	}
	// Compare in whole seconds, the timestamp's resolution.
	d := time.Duration(now.Unix()-s.ts) * time.Second
	switch {
	case d > window:
		return s, which, fmt.Errorf("%w: %s old, window %s", ErrSignatureExpired, d, window)
	case d < -window:
		return s, which, fmt.Errorf("%w: %s ahead, window %s", ErrSignatureFuture, -d, window)
	}
	return s, which, nil
}

// requestURI is the request URI a signature covers: the raw one a server
// received, else the one a client will send.
func requestURI(r *http.Request) string {
	if r.RequestURI != "" {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

// SignRequest sets req's Authorization header to the signature of its
// method, request URI and body at now, with a fresh random nonce. body
// must be what req will send.
func SignRequest(req *http.Request, secret []byte, body []byte, now time.Time) {
	req.Header.Set(SignatureHeader, Sign(secret, req.Method, requestURI(req), body, now))
}

// SignRequestNonce is SignRequest with this nonce (see SignNonce).
func SignRequestNonce(req *http.Request, secret []byte, body []byte, now time.Time, nonce string) {
	req.Header.Set(SignatureHeader, SignNonce(secret, req.Method, requestURI(req), body, now, nonce))
}

// VerifyRequest verifies the signature of a received request whose body
// (read by the caller, size-limited) is body, like Verify. It does not
// detect replays; Verifier.VerifyRequest does.
func VerifyRequest(r *http.Request, body []byte, secret []byte, now time.Time, window time.Duration) error {
	return Verify(secret, r.Method, requestURI(r), body, r.Header.Get(SignatureHeader), now, window)
}

// Verifier verifies signatures like Verify and also refuses a signature it
// has accepted before while that signature is still inside its window: a
// signature with a nonce is refused when its nonce was accepted before,
// one without (the first version of the scheme) when its MAC was, so two
// identical requests made within one second without nonces are one
// replayed. It remembers at most MaxEntries signatures, each until its
// timestamp plus the window has passed; when all are live it refuses new
// signatures with ErrReplayCacheFull rather than forget one. A Verifier is
// safe for concurrent use.
type Verifier struct {
	window atomic.Int64 // time.Duration
	max    int

	mu   sync.Mutex
	seen map[[sha256.Size]byte]struct{}
	exp  expiryHeap
}

// NewVerifier returns a Verifier with this window (DefaultSignatureWindow
// when <= 0) that remembers at most maxEntries signatures
// (DefaultReplayEntries when <= 0).
func NewVerifier(window time.Duration, maxEntries int) *Verifier {
	if window <= 0 {
		window = DefaultSignatureWindow
	}
	if maxEntries <= 0 {
		maxEntries = DefaultReplayEntries
	}
	v := &Verifier{max: maxEntries, seen: make(map[[sha256.Size]byte]struct{})}
	v.window.Store(int64(window))
	return v
}

// SetWindow changes the window (a reload; DefaultSignatureWindow when
// <= 0). Signatures remembered so far keep the expiry they were given.
func (v *Verifier) SetWindow(window time.Duration) {
	if window <= 0 {
		window = DefaultSignatureWindow
	}
	v.window.Store(int64(window))
}

// Verify is Verify with the Verifier's window plus replay detection.
func (v *Verifier) Verify(secret []byte, method, path string, body []byte, header string, now time.Time) error {
	_, err := v.VerifyKeys([][]byte{secret}, method, path, body, header, now)
	return err
}

// VerifyKeys is Verify with any of secrets, tried in order (a group's
// secret and, while it is being rotated, its previous one; empty ones are
// skipped): it returns the index of the secret that made the signature,
// -1 with an error.
func (v *Verifier) VerifyKeys(secrets [][]byte, method, path string, body []byte, header string, now time.Time) (int, error) {
	window := time.Duration(v.window.Load())
	s, which, err := verify(secrets, method, path, body, header, now, window)
	if err != nil {
		return -1, err
	}
	// Verify accepts until now.Unix()-ts > window, i.e. up to a second
	// past ts+window.
	if err := v.remember(replayKey(s), time.Unix(s.ts, 0).Add(window+time.Second), now); err != nil {
		return -1, err
	}
	return which, nil
}

// replayKey is what a Verifier remembers of an accepted signature: its
// nonce (hashed, with a prefix that no MAC input has), else its MAC.
func replayKey(s signature) [sha256.Size]byte {
	var key [sha256.Size]byte
	if s.nonce == "" {
		copy(key[:], s.sig)
		return key
	}
	return sha256.Sum256([]byte("nonce\x00" + s.nonce))
}

// VerifyRequest is VerifyRequest with the Verifier's window plus replay
// detection.
func (v *Verifier) VerifyRequest(r *http.Request, body []byte, secret []byte, now time.Time) error {
	return v.Verify(secret, r.Method, requestURI(r), body, r.Header.Get(SignatureHeader), now)
}

// VerifyRequestKeys is VerifyRequest with any of secrets (see VerifyKeys).
func (v *Verifier) VerifyRequestKeys(r *http.Request, body []byte, secrets [][]byte, now time.Time) (int, error) {
	return v.VerifyKeys(secrets, r.Method, requestURI(r), body, r.Header.Get(SignatureHeader), now)
}

// Len returns the number of signatures the Verifier remembers.
func (v *Verifier) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.seen)
}

func (v *Verifier) remember(key [sha256.Size]byte, until, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for len(v.exp) > 0 && v.exp[0].until.Before(now) {
		delete(v.seen, heap.Pop(&v.exp).(expiry).key)
	}
	if _, ok := v.seen[key]; ok {
		return ErrReplayed
	}
	if len(v.seen) >= v.max {
		return fmt.Errorf("%w: %d signatures live", ErrReplayCacheFull, len(v.seen))
	}
	v.seen[key] = struct{}{}
	heap.Push(&v.exp, expiry{key: key, until: until})
	return nil
}

type expiry struct {
	key   [sha256.Size]byte
	until time.Time
}

// expiryHeap orders remembered signatures by when they expire.
type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
