package acmeclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/probe/probetest"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// TestRenewAt: two thirds of the lifetime, earlier by at most a
// twentieth, jitter clamped, a lifetime of 0 renewed at once.
func TestRenewAt(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name   string
		life   time.Duration
		jitter float64
		want   time.Duration
	}{
		{"90 days, no jitter", 90 * day, 0, 60 * day},
		{"90 days, half", 90 * day, 0.5, 60*day - 90*day/40},
		{"90 days, jitter clamped", 90 * day, 7, 60*day - 90*day/20},
		{"negative jitter", 90 * day, -1, 60 * day},
		{"15 s", 15 * time.Second, 0, 10 * time.Second},
		{"no lifetime", 0, 0.5, 0},
		{"expired before it began", -day, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RenewAt(t0, t0.Add(tt.life), tt.jitter).Sub(t0); got != tt.want {
				t.Errorf("RenewAt = t0+%s, want t0+%s", got, tt.want)
			}
		})
	}
}

// TestBackoff: doubling from base to the ceiling, within [d/2, d).
func TestBackoff(t *testing.T) {
	r := mrand.New(mrand.NewPCG(1, 2))
	tests := []struct {
		n    int
		want time.Duration // the unjittered wait
	}{{0, 30 * time.Second}, {1, 30 * time.Second}, {2, time.Minute}, {4, 4 * time.Minute}, {8, time.Hour}, {100, time.Hour}}
	for _, tt := range tests {
		for range 20 {
			got := Backoff(tt.n, DefaultRetryBase, DefaultRetryMax, r)
			if got < tt.want/2 || got >= tt.want {
				t.Fatalf("Backoff(%d) = %s, want in [%s, %s)", tt.n, got, tt.want/2, tt.want)
			}
		}
	}
}

// selfSigned writes a certificate for names valid from nb to na into dir
// as the Manager stores it.
func selfSigned(t *testing.T, dir string, nb, na time.Time, names ...string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names, NotBefore: nb, NotAfter: na}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := (store{dir: dir}).saveCertificate(key, [][]byte{der}); err != nil {
		t.Fatal(err)
	}
}

type nopSolver struct{ published, removed atomic.Int32 }

func (s *nopSolver) Publish(context.Context, Challenge) error { s.published.Add(1); return nil }
func (s *nopSolver) Remove(context.Context, Challenge) error  { s.removed.Add(1); return nil }

// TestStoredCertificate: a stored certificate that is valid and covers
// the names is installed by New, before any order; one that expired or
// lacks a name is not. The files are 0600.
func TestStoredCertificate(t *testing.T) {
	names := []string{"www.example.org", "fra1.example.org"}
	tests := []struct {
		name    string
		nb, na  time.Time
		names   []string
		install bool
	}{
		{"valid", t0.Add(-time.Hour), t0.Add(90 * 24 * time.Hour), names, true},
		{"expired", t0.Add(-2 * time.Hour), t0.Add(-time.Hour), names, false},
		{"not yet valid", t0.Add(time.Hour), t0.Add(2 * time.Hour), names, false},
		{"lacks the host", t0.Add(-time.Hour), t0.Add(time.Hour), names[:1], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "acme")
			selfSigned(t, dir, tt.nb, tt.na, tt.names...)
			fi, err := os.Stat(filepath.Join(dir, certificateFile))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("stat: %v, mode %v, want 0600", err, fi.Mode())
			}
			var got *tls.Certificate
			m, err := New(Options{Directory: "https://ca.invalid/dir", Dir: dir, Names: names, Solver: &nopSolver{},
				Install: func(c *tls.Certificate) { got = c }, Clock: func() time.Time { return t0 }})
			if err != nil {
				t.Fatal(err)
			}
			if (got != nil) != tt.install || (m.Current() != nil) != tt.install {
				t.Fatalf("installed %v, current %v, want %v", got != nil, m.Current() != nil, tt.install)
			}
		})
	}
}

// TestRunFailsAndRetries: a CA that fails every request is counted as
// failed orders, retried after backoff, and the stored certificate (due
// for renewal) keeps serving; the metric passes promlint.
func TestRunFailsAndRetries(t *testing.T) {
	var hits atomic.Int32
	ca := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden) // not retried inside x/crypto/acme, as 5xx would be
		w.Write([]byte(`{"type": "urn:ietf:params:acme:error:unauthorized", "detail": "no"}`))
	}))
	defer ca.Close()
	dir := t.TempDir()
	now := time.Now()
	selfSigned(t, dir, now.Add(-time.Hour), now.Add(time.Hour), "www.example.org")
	reg := prometheus.NewRegistry()
	m, err := New(Options{Directory: ca.URL + "/dir", HTTP: ca.Client(), Dir: dir, Names: []string{"www.example.org"},
		Solver: &nopSolver{}, Install: func(*tls.Certificate) {}, Lifetime: time.Second,
		RetryBase: 20 * time.Millisecond, RetryMax: 40 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	old := m.Current()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	probetest.Until(t, 10*time.Second, func() string {
		if n := testutil.ToFloat64(m.orders.WithLabelValues(ResultFailed, ChallengeDNS01)); n < 3 {
			return fmt.Sprintf("%v failed orders, want 3", n)
		}
		return ""
	})
	if hits.Load() < 3 {
		t.Errorf("the CA was asked %d times, want 3 at least", hits.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.Current() != old {
		t.Error("the certificate served changed after failed orders")
	}
	if n, err := testutil.GatherAndCount(reg, "transmirror_mirror_acme_orders_total"); err != nil || n != 2 {
		t.Errorf("series %d (%v), want 2 (issued, failed)", n, err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

// TestOrder runs orders against the fake CA: an issued certificate covers
// both names, is installed and stored; a refused name fails the order;
// either way every published value is removed.
func TestOrder(t *testing.T) {
	names := []string{"www.example.org", "fra1.example.org"}
	tests := []struct {
		name    string
		refuse  []string
		wantErr string // "" for issued
	}{
		{"issued", nil, ""},
		{"host refused", []string{"fra1.example.org"}, "fra1.example.org"},
		{"group refused", []string{"www.example.org"}, "www.example.org"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &recordingSolver{}
			ca := newFakeCA(t, s, tt.refuse...)
			dir := t.TempDir()
			var installed []*tls.Certificate
			m, err := New(Options{Directory: ca.url("/dir"), HTTP: ca.srv.Client(), Dir: dir, Names: names, Solver: s,
				Install: func(c *tls.Certificate) { installed = append(installed, c) }})
			if err != nil {
				t.Fatal(err)
			}
			err = m.renew(context.Background())
			live, published, removed := s.counts()
			if live != 0 || removed != published || published == 0 {
				t.Errorf("solver: %d live, %d published, %d removed; want none live, all removed", live, published, removed)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || len(installed) != 0 {
					t.Fatalf("renew = %v, %d installed; want an error naming %s, none installed", err, len(installed), tt.wantErr)
				}
				return
			}
			if err != nil || len(installed) != 1 || !usable(installed[0].Leaf, names, time.Now()) {
				t.Fatalf("renew = %v, %d installed", err, len(installed))
			}
			stored, err := (store{dir: dir}).certificate(names, time.Now())
			if err != nil || stored == nil || !stored.Leaf.Equal(installed[0].Leaf) {
				t.Fatalf("stored: %v, %v; want the installed certificate", stored, err)
			}
			if fi, err := os.Stat(filepath.Join(dir, accountFile)); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("account key: %v, %v", err, fi)
			}
		})
	}
}

// TestRunRenews: Run orders at once without a certificate, then again at
// two thirds of each one's lifetime (here taken as 3 s, less a jitter of
// 150 ms at most; NotBefore is whole seconds, so the third certificate
// comes 1.85 s after the first at the earliest).
func TestRunRenews(t *testing.T) {
	s := &recordingSolver{}
	ca := newFakeCA(t, s)
	var mu sync.Mutex
	var serials []string
	m, err := New(Options{Directory: ca.url("/dir"), HTTP: ca.srv.Client(), Dir: t.TempDir(), Names: []string{"www.example.org"}, Solver: s,
		Lifetime: 3 * time.Second, Install: func(c *tls.Certificate) {
			mu.Lock()
			serials = append(serials, c.Leaf.SerialNumber.String())
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	start := time.Now()
	go func() { done <- m.Run(ctx) }()
	probetest.Until(t, 10*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(serials) < 3 {
			return fmt.Sprintf("%d certificates installed, want 3", len(serials))
		}
		return ""
	})
	if took := time.Since(start); took < 1850*time.Millisecond {
		t.Errorf("three certificates in %v: renewed before two thirds of 3 s", took)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if serials[0] == serials[1] || serials[1] == serials[2] {
		t.Errorf("serials %v: a renewal installed the same certificate", serials)
	}
	if n := testutil.ToFloat64(m.orders.WithLabelValues(ResultIssued, ChallengeDNS01)); n < 3 {
		t.Errorf("issued orders %v, want ≥ 3", n)
	}
}
