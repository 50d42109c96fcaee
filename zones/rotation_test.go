package zones

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// groupYAML is a config with one group whose keys below the name are
// extra, read as if from testdata/good/rotation.yaml (so that relative
// paths find testdata/good's files).
func groupYAML(t *testing.T, extra string) (*Set, error) {
	t.Helper()
	data := `zones:
  - origin: example.org.
    file: example.org.zone
groups:
  - name: www.example.org.
` + extra + `
    members:
      - {name: fra1, host: fra1.example.org., addresses: [192.0.2.10], capacity: 10}
`
	cfg, err := Parse(filepath.Join("testdata", "good", "rotation.yaml"), []byte(data))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return Build(cfg)
}

func TestPreviousSecret(t *testing.T) {
	until := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		keys  string
		want  string // error substring; "" for none
		check func(t *testing.T, g *GroupConfig)
	}{
		{"rotation", "    secret: new-secret\n    previous_secret: old-secret\n    previous_secret_until: 2025-03-01T12:00:00Z", "", func(t *testing.T, g *GroupConfig) {
			if !g.PreviousSecretExpiry.Equal(until) {
				t.Errorf("expiry %v, want %v", g.PreviousSecretExpiry, until)
			}
			for _, c := range []struct {
				at   time.Time
				want []string
			}{
				{until.Add(-time.Second), []string{"new-secret", "old-secret"}},
				{until, []string{"new-secret"}},
				{until.Add(time.Hour), []string{"new-secret"}},
			} {
				got := fmt.Sprintf("%s", g.Secrets(c.at))
				if want := fmt.Sprintf("%s", c.want); got != want {
					t.Errorf("Secrets(%v) = %s, want %s", c.at, got, want)
				}
			}
		}},
		{"rotation with an offset", "    secret: new-secret\n    previous_secret: old-secret\n    previous_secret_until: 2025-03-01T13:00:00+01:00", "", func(t *testing.T, g *GroupConfig) {
			if !g.PreviousSecretExpiry.Equal(until) {
				t.Errorf("expiry %v, want %v", g.PreviousSecretExpiry, until)
			}
		}},
		{"previous secret from a file", "    secret: new-secret\n    previous_secret: {file: group.secret}\n    previous_secret_until: 2025-03-01T12:00:00Z", "", func(t *testing.T, g *GroupConfig) {
			if g.PreviousSecret != "s3cret-for-www-pushes" {
				t.Errorf("previous secret %q, want the file's", g.PreviousSecret)
			}
		}},
		{"an end in the past is not an error", "    secret: new-secret\n    previous_secret: old-secret\n    previous_secret_until: 2001-01-01T00:00:00Z", "", func(t *testing.T, g *GroupConfig) {
			if n := len(g.Secrets(time.Now())); n != 1 {
				t.Errorf("%d secrets accepted after the end, want 1", n)
			}
		}},
		{"no end", "    secret: new-secret\n    previous_secret: old-secret", `rotation.yaml:7:5: group "www.example.org.": previous_secret needs previous_secret_until`, nil},
		{"end not RFC 3339", "    secret: new-secret\n    previous_secret: old-secret\n    previous_secret_until: tomorrow", `rotation.yaml:8:5: group "www.example.org.": previous_secret_until "tomorrow": want an RFC 3339 time`, nil},
		{"end without a previous secret", "    secret: new-secret\n    previous_secret_until: 2025-03-01T12:00:00Z", `rotation.yaml:7:5: group "www.example.org.": previous_secret_until without a previous_secret`, nil},
		{"previous secret without a secret", "    previous_secret: old-secret\n    previous_secret_until: 2025-03-01T12:00:00Z", `rotation.yaml:6:5: group "www.example.org.": previous_secret without a secret`, nil},
		{"the same secret", "    secret: same\n    previous_secret: same\n    previous_secret_until: 2025-03-01T12:00:00Z", `rotation.yaml:7:5: group "www.example.org.": previous_secret is the same as the secret`, nil},
		{"missing file", "    secret: new-secret\n    previous_secret: {file: nope.secret}\n    previous_secret_until: 2025-03-01T12:00:00Z", `rotation.yaml:7:5: group "www.example.org.": previous_secret: file nope.secret: no such file or directory`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := groupYAML(t, tt.keys)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want %q", err, tt.want)
				}
				if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
					t.Errorf("%d error lines, want 1:\n%v", n, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := set.Group("www.example.org.")
			tt.check(t, g)
			// Build accepts its own output again.
			s2, err := Build(set.Config)
			if err != nil {
				t.Fatalf("Build(Set.Config): %v", err)
			}
			if g2 := s2.Group("www.example.org."); g2.PreviousSecret != g.PreviousSecret || !g2.PreviousSecretExpiry.Equal(g.PreviousSecretExpiry) {
				t.Errorf("rebuilt group %v", g2)
			}
		})
	}
}

// TestConfigRedactsSecrets: a config printed with any verb or logged with
// either slog handler shows none of its secrets.
func TestConfigRedactsSecrets(t *testing.T) {
	set, err := groupYAML(t, "    secret: new-secret-value\n    previous_secret: old-secret-value\n    previous_secret_until: 2025-03-01T12:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	c := *set.Config
	c.AdminToken = "admin-token-value-0123"
	c.Server.TSIG = []TSIGKey{{Name: "k.", Algorithm: "hmac-sha256.", Secret: "dHNpZy1zZWNyZXQtdmFsdWU="}}
	secrets := []string{"new-secret-value", "old-secret-value", "admin-token-value-0123", "dHNpZy1zZWNyZXQtdmFsdWU="}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "config", c, "ptr", &c, "group", c.Groups[0], "key", c.Server.TSIG[0])
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "config", c, "ptr", &c, "group", c.Groups[0], "groups", c.Groups)
	outputs := map[string]string{
		//lint:ignore S1025 the test is of what fmt's verbs print, %s included
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%s": fmt.Sprintf("%s", &c),
		"group %+v": fmt.Sprintf("%+v", c.Groups[0]), "groups %v": fmt.Sprintf("%v", c.Groups),
		"tsig %+v": fmt.Sprintf("%+v", c.Server.TSIG), "slog": logged.String(),
	}
	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("shows %q:\n%s", s, out)
				}
			}
			if !strings.Contains(out, "<redacted>") {
				t.Errorf("no <redacted> in:\n%s", out)
			}
		})
	}
}
