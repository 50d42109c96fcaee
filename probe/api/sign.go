package api

import (
	"container/heap"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

// DefaultSignatureWindow is how far a signature's timestamp may be from the
// verifier's clock, in either direction, by default.
const DefaultSignatureWindow = 30 * time.Second

// DefaultReplayEntries is a Verifier's default bound on remembered signatures.
const DefaultReplayEntries = 65536

// stringToSign is what the MAC covers: the scheme, the timestamp in Unix
// seconds, the method, the request URI and the hex SHA-256 of the body, one
// per line.
func stringToSign(ts int64, method, path string, body []byte) []byte {
	sum := sha256.Sum256(body)
	var b strings.Builder
	b.Grow(len(SignatureScheme) + len(method) + len(path) + 2*len(sum) + 32)
	b.WriteString(SignatureScheme)
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(ts, 10))
	b.WriteByte('\n')
	b.WriteString(method)
	b.WriteByte('\n')
	b.WriteString(path)
	b.WriteByte('\n')
	b.WriteString(hex.EncodeToString(sum[:]))
	return []byte(b.String())
}

func mac(secret []byte, ts int64, method, path string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(stringToSign(ts, method, path, body))
	return m.Sum(nil)
}

// Sign returns the value of the Authorization header for a request with
// this method, request URI (path and query, as sent) and body at ts:
// "TM-HMAC-SHA256 ts=<unix seconds>,sig=<hex HMAC-SHA256>". The MAC covers
// the timestamp, so it can not be moved to another time.
func Sign(secret []byte, method, path string, body []byte, ts time.Time) string {
	t := ts.Unix()
	return SignatureScheme + " ts=" + strconv.FormatInt(t, 10) + ",sig=" + hex.EncodeToString(mac(secret, t, method, path, body))
}

// parseSignature splits a header value made by Sign.
func parseSignature(header string) (ts int64, sig []byte, err error) {
	if header == "" {
		return 0, nil, ErrNoSignature
	}
	scheme, params, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, SignatureScheme) {
		return 0, nil, fmt.Errorf("%w: want scheme %s", ErrMalformedSignature, SignatureScheme)
	}
	var haveTS, haveSig bool
	for _, p := range strings.Split(params, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		switch {
		case !ok:
			return 0, nil, fmt.Errorf("%w: parameter %q: want key=value", ErrMalformedSignature, p)
		case k == "ts" && !haveTS:
			haveTS = true
			if ts, err = strconv.ParseInt(v, 10, 64); err != nil {
				return 0, nil, fmt.Errorf("%w: ts %q: want Unix seconds", ErrMalformedSignature, v)
			}
		case k == "sig" && !haveSig:
			haveSig = true
			if sig, err = hex.DecodeString(v); err != nil || len(sig) != sha256.Size {
				return 0, nil, fmt.Errorf("%w: sig: want %d hex digits", ErrMalformedSignature, 2*sha256.Size)
			}
		default:
			return 0, nil, fmt.Errorf("%w: unexpected or repeated parameter %q", ErrMalformedSignature, k)
		}
	}
	if !haveTS || !haveSig {
		return 0, nil, fmt.Errorf("%w: want ts and sig", ErrMalformedSignature)
	}
	return ts, sig, nil
}

// Verify checks header, a value made by Sign, for a request with this
// method, request URI and body: the MAC (compared in constant time) and the
// timestamp, which must be within window (DefaultSignatureWindow when
// window <= 0) of now in either direction. It does not detect replays; a
// Verifier does.
func Verify(secret []byte, method, path string, body []byte, header string, now time.Time, window time.Duration) error {
	_, err := verify(secret, method, path, body, header, now, window)
	return err
}

func verify(secret []byte, method, path string, body []byte, header string, now time.Time, window time.Duration) ([sha256.Size]byte, error) {
	var key [sha256.Size]byte
	if window <= 0 {
		window = DefaultSignatureWindow
	}
	ts, sig, err := parseSignature(header)
	if err != nil {
		return key, err
	}
	if !hmac.Equal(sig, mac(secret, ts, method, path, body)) {
		return key, ErrBadSignature
	}
	// Compare in whole seconds, the timestamp's resolution.
	d := time.Duration(now.Unix()-ts) * time.Second
	switch {
	case d > window:
		return key, fmt.Errorf("%w: %s old, window %s", ErrSignatureExpired, d, window)
	case d < -window:
		return key, fmt.Errorf("%w: %s ahead, window %s", ErrSignatureFuture, -d, window)
	}
	copy(key[:], sig)
	return key, nil
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
// method, request URI and body at now. body must be what req will send.
func SignRequest(req *http.Request, secret []byte, body []byte, now time.Time) {
	req.Header.Set(SignatureHeader, Sign(secret, req.Method, requestURI(req), body, now))
}

// VerifyRequest verifies the signature of a received request whose body
// (read by the caller, size-limited) is body, like Verify. It does not
// detect replays; Verifier.VerifyRequest does.
func VerifyRequest(r *http.Request, body []byte, secret []byte, now time.Time, window time.Duration) error {
	return Verify(secret, r.Method, requestURI(r), body, r.Header.Get(SignatureHeader), now, window)
}

// Verifier verifies signatures like Verify and also refuses a signature it
// has accepted before while that signature is still inside its window. It
// remembers at most MaxEntries signatures, each until its timestamp plus
// the window has passed; when all are live it refuses new signatures with
// ErrReplayCacheFull rather than forget one. A Verifier is safe for
// concurrent use.
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
	window := time.Duration(v.window.Load())
	key, err := verify(secret, method, path, body, header, now, window)
	if err != nil {
		return err
	}
	ts, _, _ := parseSignature(header) // parsed fine in verify
	// Verify accepts until now.Unix()-ts > window, i.e. up to a second
	// past ts+window.
	return v.remember(key, time.Unix(ts, 0).Add(window+time.Second), now)
}

// VerifyRequest is VerifyRequest with the Verifier's window plus replay
// detection.
func (v *Verifier) VerifyRequest(r *http.Request, body []byte, secret []byte, now time.Time) error {
	return v.Verify(secret, r.Method, requestURI(r), body, r.Header.Get(SignatureHeader), now)
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
