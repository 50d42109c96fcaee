package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
)

// TestVersion: -version prints buildinfo's one line for dnsd, ending with
// the Go version, and exits 0 without doing anything else; a stray argument is still refused.
func TestVersion(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"alone", []string{"-version"}, 0},
		{"without a mode", []string{"-version", "-log-level", "debug"}, 0},
		{"with a mode", []string{"-demo", "-check", "-version"}, 0},
		{"stray argument", []string{"-version", "extra"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, &out, &errb); code != tt.code {
				t.Fatalf("dnsd %q: exit %d, want %d (stderr %s)", tt.args, code, tt.code, errb.String())
			}
			if tt.code != 0 {
				return
			}
			got := out.String()
			if got != buildinfo.Version("dnsd")+"\n" || !strings.HasPrefix(got, "dnsd ") || !strings.HasSuffix(got, " "+runtime.Version()+"\n") {
				t.Errorf("stdout %q, want the one line %q", got, buildinfo.Version("dnsd"))
			}
			if errb.Len() > 0 {
				t.Errorf("stderr %q, want nothing", errb.String())
			}
		})
	}
}
