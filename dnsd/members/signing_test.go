package members_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/dnsd/admin"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// rotationConfig is testenv.Config with the group's secret rotated: new
// is the secret, old the previous one until until.
func rotationConfig(newSecret, old string, until time.Time) string {
	return strings.Replace(testenv.Config(""), "    secret: "+testenv.Secret+"\n",
		"    secret: "+newSecret+"\n    previous_secret: "+old+"\n    previous_secret_until: "+until.UTC().Format(time.RFC3339)+"\n", 1)
}

// signedAdmin serves the admin API of e's controller with a counter of
// signed requests, returning its URL and the counter.
func signedAdmin(t *testing.T, e *ctlEnv) (string, *prometheus.CounterVec) {
	t.Helper()
	signed, err := admin.NewSignedRequests(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewHandler(admin.Options{Logger: testenv.DiscardLogger(), Gatherer: prometheus.NewRegistry(),
		Membership: e.ctl, Reports: e.in, Verifier: api.NewVerifier(30*time.Second, 0), SignedRequests: signed}))
	t.Cleanup(srv.Close)
	return srv.URL, signed
}

// TestSecretRotation: during a rotation writes signed with the previous
// secret are accepted as well as those signed with the new one (and
// counted apart); once previous_secret_until has passed (a reload with
// it in the past here) only the new one is.
func TestSecretRotation(t *testing.T) {
	const newSecret, old = "the-new-group-secret", testenv.Secret
	dir := t.TempDir()
	e := startCtl(t, dir, rotationConfig(newSecret, old, time.Now().Add(time.Hour)))
	url, signed := signedAdmin(t, e)
	drain := func(secret string) error {
		c, err := api.NewClient(url, api.ClientOptions{Secret: []byte(secret)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Drain(context.Background(), "www.example.org.", "fra1")
		return err
	}
	unauthorized := func(err error) bool {
		var se *api.StatusError
		return errors.As(err, &se) && se.Code == http.StatusUnauthorized
	}
	steps := []struct {
		name            string
		secret          string
		ok              bool
		current, before float64
	}{
		{"new secret", newSecret, true, 1, 0},
		{"previous secret during the rotation", old, true, 1, 1},
		{"another secret", "not-the-secret", false, 1, 1},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			err := drain(s.secret)
			if s.ok && err != nil || !s.ok && !unauthorized(err) {
				t.Fatalf("drain: %v, want ok %v", err, s.ok)
			}
			if c, p := testutil.ToFloat64(signed.WithLabelValues("current")), testutil.ToFloat64(signed.WithLabelValues("previous")); c != s.current || p != s.before {
				t.Errorf("signed requests current %v previous %v, want %v %v", c, p, s.current, s.before)
			}
		})
	}

	// The rotation is over: previous_secret_until in the past.
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(rotationConfig(newSecret, old, time.Now().Add(-time.Minute))), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ctl.Load(set); err != nil {
		t.Fatal(err)
	}
	t.Run("previous secret after the rotation", func(t *testing.T) {
		if err := drain(old); !unauthorized(err) {
			t.Errorf("drain with the previous secret: %v, want 401", err)
		}
	})
	t.Run("new secret after the rotation", func(t *testing.T) {
		if err := drain(newSecret); err != nil {
			t.Errorf("drain with the new secret: %v", err)
		}
	})
	t.Run("views show no secret", func(t *testing.T) {
		for _, path := range []string{"/v1/groups", "/v1/groups/www.example.org."} {
			resp, err := http.Get(url + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(newSecret)) || bytes.Contains(b, []byte(old)) {
				t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
			}
		}
	})
}

// TestRepeatedCommands: drain, undrain, drain within one second are three
// commands (each signature has its own nonce); the same request sent
// again byte for byte is refused as a replay and changes nothing.
func TestRepeatedCommands(t *testing.T) {
	e := startCtl(t, t.TempDir(), testenv.Config(""))
	now := time.Now()
	c, err := api.NewClient(e.admin.URL, api.ClientOptions{Secret: []byte(testenv.Secret), Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	steps := []struct {
		name    string
		call    func() (api.Drained, error)
		drained bool
	}{
		{"drain", func() (api.Drained, error) { return c.Drain(ctx, "www.example.org.", "fra1") }, true},
		{"undrain", func() (api.Drained, error) { return c.Undrain(ctx, "www.example.org.", "fra1") }, false},
		{"drain again", func() (api.Drained, error) { return c.Drain(ctx, "www.example.org.", "fra1") }, true},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			d, err := s.call()
			if err != nil || d.Drained != s.drained {
				t.Fatalf("%+v, %v", d, err)
			}
			v, _ := e.ctl.View("www.example.org.")
			if got := (v.Members[0].State == "draining"); got != s.drained {
				t.Errorf("drained %v after %s", got, s.name)
			}
		})
	}
	t.Run("replayed request", func(t *testing.T) {
		const path = "/v1/groups/www.example.org./members/fra1/undrain"
		req, err := http.NewRequest(http.MethodPost, e.admin.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		api.SignRequest(req, []byte(testenv.Secret), nil, now)
		for i, want := range []int{http.StatusOK, http.StatusUnauthorized} {
			again, _ := http.NewRequest(http.MethodPost, e.admin.URL+path, nil)
			again.Header = req.Header.Clone()
			resp, err := http.DefaultClient.Do(again)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || want == http.StatusUnauthorized && !strings.Contains(string(b), "replayed") {
				t.Errorf("request %d: %d %s, want %d", i+1, resp.StatusCode, b, want)
			}
		}
		// The replay changed nothing: drain, then replay the undrain.
		if _, err := c.Drain(ctx, "www.example.org.", "fra1"); err != nil {
			t.Fatal(err)
		}
		again, _ := http.NewRequest(http.MethodPost, e.admin.URL+path, nil)
		again.Header = req.Header.Clone()
		resp, err := http.DefaultClient.Do(again)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if v, _ := e.ctl.View("www.example.org."); resp.StatusCode != http.StatusUnauthorized || !(v.Members[0].State == "draining") {
			t.Errorf("replayed undrain: %d, drained %v; want 401 and still drained", resp.StatusCode, (v.Members[0].State == "draining"))
		}
	})
}
