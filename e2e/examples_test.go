package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDocExamples runs `-check` of the real binaries on every example
// config the docs show (docs/examples), so the docs can not drift from
// what the daemons accept.
func TestDocExamples(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("..", "docs", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			binary := "dnsd"
			if strings.HasPrefix(name, "mirror") {
				binary = "mirror"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin(binary), "-check", "-config", filepath.Join("..", "docs", "examples", name)).CombinedOutput()
			if err != nil || !strings.Contains(string(out), ": ok: ") {
				t.Errorf("%s -check %s: %v\n%s", binary, name, err, out)
			}
		})
	}
	if n < 4 {
		t.Errorf("only %d example configs in docs/examples", n)
	}
}
