package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
)

// TestVersion: -version prints buildinfo's one line for groupctl, ending with
// the Go version, and exits 0 without doing anything else; it comes before any command.
func TestVersion(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"alone", []string{"-version"}, 0},
		{"before a command", []string{"-server", "http://127.0.0.1:1", "-version", "list"}, 0},
		{"unknown flag", []string{"-version", "-bogus"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, &out, &errb); code != tt.code {
				t.Fatalf("groupctl %q: exit %d, want %d (stderr %s)", tt.args, code, tt.code, errb.String())
			}
			if tt.code != 0 {
				return
			}
			got := out.String()
			if got != buildinfo.Version("groupctl")+"\n" || !strings.HasPrefix(got, "groupctl ") || !strings.HasSuffix(got, " "+runtime.Version()+"\n") {
				t.Errorf("stdout %q, want the one line %q", got, buildinfo.Version("groupctl"))
			}
			if errb.Len() > 0 {
				t.Errorf("stderr %q, want nothing", errb.String())
			}
		})
	}
}
