package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// t0 is a fixed instant, aligned to the second.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// reportJSON is a load report body, what a push signs.
const reportJSON = `{"group":"www","member":"fra1","seq":42,"time":"2025-03-01T12:00:00.123456789Z","r":100.5,"m":1.25,"conns":7,"bytes_per_second":1000000,"redirects_per_second":2,"load":1017.5,"capacity":5000}`

// nonceA and nonceB are nonces as NewNonce makes them.
const (
	nonceA = "AAECAwQFBgcICQoLDA0ODw"
	nonceB = "EBESExQVFhcYGRobHB0eHw"
)

func TestSignVerify(t *testing.T) {
	secret := []byte("group secret")
	body := []byte(reportJSON)
	const path = "/v1/groups/www/report?x=1"
	good := SignNonce(secret, "POST", path, body, t0, nonceA)
	legacy := SignNonce(secret, "POST", path, body, t0, "")
	tests := []struct {
		name   string
		secret []byte
		method string
		path   string
		body   []byte
		header string
		now    time.Time
		want   error
	}{
		{"good", secret, "POST", path, body, good, t0, nil},
		{"good 30s later", secret, "POST", path, body, good, t0.Add(30 * time.Second), nil},
		{"good 30s earlier", secret, "POST", path, body, good, t0.Add(-30 * time.Second), nil},
		{"random nonce", secret, "POST", path, body, Sign(secret, "POST", path, body, t0), t0, nil},
		{"without a nonce (first version)", secret, "POST", path, body, legacy, t0, nil},
		{"wrong secret", []byte("other"), "POST", path, body, good, t0, ErrBadSignature},
		{"tampered body", secret, "POST", path, append(bytes.Clone(body), ' '), good, t0, ErrBadSignature},
		{"other method", secret, "PUT", path, body, good, t0, ErrBadSignature},
		{"other path", secret, "POST", "/v1/groups/ftp/report?x=1", body, good, t0, ErrBadSignature},
		{"moved timestamp", secret, "POST", path, body, strings.Replace(good, "ts=1740830400", "ts=1740830401", 1), t0, ErrBadSignature},
		{"other nonce", secret, "POST", path, body, strings.Replace(good, nonceA, nonceB, 1), t0, ErrBadSignature},
		{"nonce dropped", secret, "POST", path, body, strings.Replace(good, ",nonce="+nonceA, "", 1), t0, ErrBadSignature},
		{"nonce added to a first version signature", secret, "POST", path, body, strings.Replace(legacy, ",sig=", ",nonce="+nonceA+",sig=", 1), t0, ErrBadSignature},
		{"old timestamp", secret, "POST", path, body, good, t0.Add(31 * time.Second), ErrSignatureExpired},
		{"future timestamp", secret, "POST", path, body, good, t0.Add(-31 * time.Second), ErrSignatureFuture},
		{"missing header", secret, "POST", path, body, "", t0, ErrNoSignature},
		{"other scheme", secret, "POST", path, body, "Bearer abc", t0, ErrMalformedSignature},
		{"short sig", secret, "POST", path, body, SignatureScheme + " ts=1740830400,sig=abcd", t0, ErrMalformedSignature},
		{"no ts", secret, "POST", path, body, SignatureScheme + " sig=" + strings.Repeat("ab", 32), t0, ErrMalformedSignature},
		{"repeated ts", secret, "POST", path, body, good + ",ts=1", t0, ErrMalformedSignature},
		{"repeated nonce", secret, "POST", path, body, good + ",nonce=" + nonceB, t0, ErrMalformedSignature},
		{"short nonce", secret, "POST", path, body, SignNonce(secret, "POST", path, body, t0, "AAECAwQFBgcICQoLDA0O"), t0, ErrMalformedSignature},
		{"padded nonce", secret, "POST", path, body, SignNonce(secret, "POST", path, body, t0, nonceA+"=="), t0, ErrMalformedSignature},
		{"nonce not base64url", secret, "POST", path, body, SignNonce(secret, "POST", path, body, t0, "AAECAwQFBgcICQoLDA0O+w"), t0, ErrMalformedSignature},
		{"long nonce", secret, "POST", path, body, SignNonce(secret, "POST", path, body, t0, strings.Repeat("A", 88)), t0, ErrMalformedSignature},
		{"extra param", secret, "POST", path, body, good + ",x=1", t0, ErrMalformedSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.secret, tt.method, tt.path, tt.body, tt.header, tt.now, 0)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
	const prefix = "TM-HMAC-SHA256 ts=1740830400,nonce=" + nonceA + ",sig="
	if !strings.HasPrefix(good, prefix) || len(good) != len(prefix)+64 {
		t.Errorf("header %q", good)
	}
	const p1 = "TM-HMAC-SHA256 ts=1740830400,sig="
	if !strings.HasPrefix(legacy, p1) || len(legacy) != len(p1)+64 {
		t.Errorf("header without a nonce %q", legacy)
	}
}

// TestStringToSign pins the bytes the MAC covers, with and without a
// nonce: a signer in another language must be able to make them.
func TestStringToSign(t *testing.T) {
	const hashOfEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	tests := []struct {
		name, nonce, want string
	}{
		{"with a nonce", nonceA, "TM-HMAC-SHA256-NONCE\n1740830400\n" + nonceA + "\nPOST\n/v1/groups/www/members/fra1/drain\n" + hashOfEmpty},
		{"first version", "", "TM-HMAC-SHA256\n1740830400\nPOST\n/v1/groups/www/members/fra1/drain\n" + hashOfEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(stringToSign(t0.Unix(), tt.nonce, "POST", "/v1/groups/www/members/fra1/drain", nil)); got != tt.want {
				t.Errorf("stringToSign =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestNewNonce(t *testing.T) {
	n1, err := NewNonce(nil)
	if err != nil {
		t.Fatal(err)
	}
	n2, _ := NewNonce(nil)
	if n1 == n2 || len(n1) != 22 {
		t.Errorf("nonces %q, %q: want two different ones of 22 characters", n1, n2)
	}
	fixed, err := NewNonce(bytes.NewReader([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}))
	if err != nil || fixed != nonceA {
		t.Errorf("NewNonce(0..15) = %q, %v; want %q", fixed, err, nonceA)
	}
	if _, err := NewNonce(bytes.NewReader([]byte{1, 2})); err == nil {
		t.Error("NewNonce from a short reader: no error")
	}
}

func TestVerifierReplay(t *testing.T) {
	secret := []byte("s")
	v := NewVerifier(30*time.Second, 2)
	h1 := SignNonce(secret, "POST", "/p", []byte("1"), t0, nonceA)
	h2 := SignNonce(secret, "POST", "/p", []byte("2"), t0, nonceB)
	h3 := Sign(secret, "POST", "/p", []byte("3"), t0.Add(40*time.Second))
	steps := []struct {
		name   string
		body   string
		header string
		now    time.Time
		want   error
	}{
		{"first", "1", h1, t0, nil},
		{"replayed", "1", h1, t0.Add(10 * time.Second), ErrReplayed},
		{"second", "2", h2, t0.Add(time.Second), nil},
		{"replay at the window's edge", "1", h1, t0.Add(30*time.Second + 900*time.Millisecond), ErrReplayed},
		{"nonce reused for another body", "4", SignNonce(secret, "POST", "/p", []byte("4"), t0, nonceA), t0.Add(2 * time.Second), ErrReplayed},
		{"full", "3", h3, t0.Add(29 * time.Second), ErrReplayCacheFull},
		{"bad signature not remembered", "x", h1, t0, ErrBadSignature},
		{"after expiry old ones go", "3", h3, t0.Add(31*time.Second + time.Millisecond), nil},
		{"expired replay is still refused by time", "1", h1, t0.Add(31 * time.Second), ErrSignatureExpired},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			err := v.Verify(secret, "POST", "/p", []byte(s.body), s.header, s.now)
			if !errors.Is(err, s.want) {
				t.Fatalf("Verify = %v, want %v", err, s.want)
			}
		})
	}
	if n := v.Len(); n != 1 {
		t.Errorf("Len = %d, want 1", n)
	}
}

// TestVerifierRepeats: the same command three times within one second
// (drain, undrain, drain) is three requests when each has its nonce, and
// one request and two replays when none has (the first version).
func TestVerifierRepeats(t *testing.T) {
	secret := []byte("s")
	const drain, undrain = "/v1/groups/www/members/fra1/drain", "/v1/groups/www/members/fra1/undrain"
	tests := []struct {
		name string
		sign func(path string, at time.Time) string
		want []error
	}{
		{"with nonces", func(path string, at time.Time) string { return Sign(secret, "POST", path, nil, at) }, []error{nil, nil, nil}},
		{"without nonces", func(path string, at time.Time) string { return SignNonce(secret, "POST", path, nil, at, "") }, []error{nil, nil, ErrReplayed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVerifier(0, 0)
			for i, path := range []string{drain, undrain, drain} {
				at := t0.Add(time.Duration(i) * 300 * time.Millisecond)
				if err := v.Verify(secret, "POST", path, nil, tt.sign(path, at), at); !errors.Is(err, tt.want[i]) {
					t.Errorf("request %d (%s): %v, want %v", i+1, path, err, tt.want[i])
				}
			}
		})
	}
}

func TestVerifierKeys(t *testing.T) {
	current, previous := []byte("new secret"), []byte("old secret")
	tests := []struct {
		name    string
		signer  []byte
		secrets [][]byte
		want    int
		err     error
	}{
		{"current", current, [][]byte{current, previous}, 0, nil},
		{"previous", previous, [][]byte{current, previous}, 1, nil},
		{"previous no longer accepted", previous, [][]byte{current}, -1, ErrBadSignature},
		{"empty secrets are skipped", current, [][]byte{nil, current}, 1, nil},
		{"other", []byte("other"), [][]byte{current, previous}, -1, ErrBadSignature},
		{"none", current, nil, -1, ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVerifier(0, 0)
			got, err := v.VerifyKeys(tt.secrets, "POST", "/p", nil, Sign(tt.signer, "POST", "/p", nil, t0), t0)
			if got != tt.want || !errors.Is(err, tt.err) {
				t.Errorf("VerifyKeys = %d, %v; want %d, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestSignRequestOverHTTP(t *testing.T) {
	secret := []byte("group secret")
	now := t0
	v := NewVerifier(0, 0)
	var stateless, replay []error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
		stateless = append(stateless, VerifyRequest(r, body, secret, now, 0))
		replay = append(replay, v.VerifyRequest(r, body, secret, now))
	}))
	defer srv.Close()
	body := []byte(reportJSON)
	req, err := http.NewRequest("POST", srv.URL+"/v1/push/www?seq=42&a=%2F", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	SignRequest(req, secret, body, now)
	for range 2 {
		req.Body = io.NopCloser(bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if stateless[0] != nil || stateless[1] != nil {
		t.Errorf("VerifyRequest: %v", stateless)
	}
	if replay[0] != nil || !errors.Is(replay[1], ErrReplayed) {
		t.Errorf("Verifier.VerifyRequest: %v, want nil then ErrReplayed", replay)
	}
}

// FuzzVerify feeds Verify arbitrary headers and bodies: it must not panic,
// must accept only a header whose MAC is this body's at its timestamp,
// and must accept the header Sign makes.
func FuzzVerify(f *testing.F) {
	secret := []byte("group secret")
	f.Add(SignNonce(secret, "POST", "/p", []byte(reportJSON), t0, nonceA), []byte(reportJSON))
	f.Add(SignNonce(secret, "POST", "/p", []byte(reportJSON), t0, ""), []byte(reportJSON))
	f.Add("TM-HMAC-SHA256 ts=1740830400,sig=", []byte{})
	f.Add("TM-HMAC-SHA256 ts=1740830400,nonce=,sig=", []byte{})
	f.Add("tm-hmac-sha256 ts=-1,sig="+strings.Repeat("00", 32), []byte("x"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		if err := Verify(secret, "POST", "/p", body, header, t0, 0); err == nil {
			s, perr := parseSignature(header)
			if perr != nil || !bytes.Equal(s.sig, mac(secret, s.ts, s.nonce, "POST", "/p", body)) {
				t.Fatalf("verified %q, whose MAC is not this body's", header)
			}
		}
		if err := Verify(secret, "POST", "/p", body, Sign(secret, "POST", "/p", body, t0), t0, 0); err != nil {
			t.Fatalf("Sign's own header refused: %v", err)
		}
	})
}
