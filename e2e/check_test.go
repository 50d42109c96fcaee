package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheck runs `dnsd -check` on good and broken configurations: exit 0 or
// 1, and every error names the file and line.
func TestCheck(t *testing.T) {
	cases := []struct {
		name     string
		config   string
		wantExit int
		want     []string // substrings of the output
	}{
		{"valid", "good.yaml", 0, []string{"ok: 1 zones, 1 groups"}},
		{"zone without SOA", "nosoa.yaml", 1, []string{"nosoa.zone", "SOA"}},
		{"CNAME beside A", "cname.yaml", 1, []string{"cname.zone:7", "CNAME"}},
		{"YAML key typo", "typo.yaml", 1, []string{"typo.yaml:11:9", "capcity"}},
		{"missing file", "nonexistent.yaml", 1, []string{"nonexistent.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin("dnsd"), "-check", "-config", filepath.Join("testdata", "check", tc.config))
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantExit {
				t.Errorf("exit %d, want %d; output:\n%s", code, tc.wantExit, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestFlagsMode serves plain zone files without a config file, the way
// other tools' test suites use dnsd, with AXFR allowed from loopback.
func TestFlagsMode(t *testing.T) {
	d := startDNSD(t, false, "-listen", "127.0.0.1:0", "-zone", "example.test="+filepath.Join("testdata", "check", "good.zone"))
	r := d.Dig(t, "ns1.example.test", "A")
	if r.Status != "NOERROR" || len(r.Answer) != 1 || r.Answer[0].Data != "127.0.0.1" {
		t.Fatalf("flags mode answer:\n%s", r.Raw)
	}
	ax := d.Dig(t, "example.test", "AXFR")
	if len(ax.Answer) < 4 || ax.Answer[0].Type != "SOA" || ax.Answer[len(ax.Answer)-1].Type != "SOA" {
		t.Errorf("AXFR from loopback in flags mode:\n%s", ax.Raw)
	}
}
