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

func TestSignVerify(t *testing.T) {
	secret := []byte("group secret")
	body := []byte(reportJSON)
	const path = "/v1/groups/www/report?x=1"
	good := Sign(secret, "POST", path, body, t0)
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
		{"wrong secret", []byte("other"), "POST", path, body, good, t0, ErrBadSignature},
		{"tampered body", secret, "POST", path, append(bytes.Clone(body), ' '), good, t0, ErrBadSignature},
		{"other method", secret, "PUT", path, body, good, t0, ErrBadSignature},
		{"other path", secret, "POST", "/v1/groups/ftp/report?x=1", body, good, t0, ErrBadSignature},
		{"moved timestamp", secret, "POST", path, body, strings.Replace(good, "ts=1740830400", "ts=1740830401", 1), t0, ErrBadSignature},
		{"old timestamp", secret, "POST", path, body, good, t0.Add(31 * time.Second), ErrSignatureExpired},
		{"future timestamp", secret, "POST", path, body, good, t0.Add(-31 * time.Second), ErrSignatureFuture},
		{"missing header", secret, "POST", path, body, "", t0, ErrNoSignature},
		{"other scheme", secret, "POST", path, body, "Bearer abc", t0, ErrMalformedSignature},
		{"short sig", secret, "POST", path, body, SignatureScheme + " ts=1740830400,sig=abcd", t0, ErrMalformedSignature},
		{"no ts", secret, "POST", path, body, SignatureScheme + " sig=" + strings.Repeat("ab", 32), t0, ErrMalformedSignature},
		{"repeated ts", secret, "POST", path, body, good + ",ts=1", t0, ErrMalformedSignature},
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
	if !strings.HasPrefix(good, "TM-HMAC-SHA256 ts=1740830400,sig=") || len(good) != len("TM-HMAC-SHA256 ts=1740830400,sig=")+64 {
		t.Errorf("header %q", good)
	}
}

func TestVerifierReplay(t *testing.T) {
	secret := []byte("s")
	v := NewVerifier(30*time.Second, 2)
	h1 := Sign(secret, "POST", "/p", []byte("1"), t0)
	h2 := Sign(secret, "POST", "/p", []byte("2"), t0)
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
	f.Add(Sign(secret, "POST", "/p", []byte(reportJSON), t0), []byte(reportJSON))
	f.Add("TM-HMAC-SHA256 ts=1740830400,sig=", []byte{})
	f.Add("tm-hmac-sha256 ts=-1,sig="+strings.Repeat("00", 32), []byte("x"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		if err := Verify(secret, "POST", "/p", body, header, t0, 0); err == nil {
			ts, sig, perr := parseSignature(header)
			if perr != nil || !bytes.Equal(sig, mac(secret, ts, "POST", "/p", body)) {
				t.Fatalf("verified %q, whose MAC is not this body's", header)
			}
		}
		if err := Verify(secret, "POST", "/p", body, Sign(secret, "POST", "/p", body, t0), t0, 0); err != nil {
			t.Fatalf("Sign's own header refused: %v", err)
		}
	})
}
