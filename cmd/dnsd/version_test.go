package main

import (
	"testing"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo/versiontest"
)

// TestVersion: -version prints buildinfo's one line for dnsd, ending with
// the Go version, and exits 0 without doing anything else; a stray argument is still refused.
func TestVersion(t *testing.T) {
	versiontest.Run(t, "dnsd", run, []versiontest.Case{
		{Name: "alone", Args: []string{"-version"}, Code: 0},
		{Name: "without a mode", Args: []string{"-version", "-log-level", "debug"}, Code: 0},
		{Name: "with a mode", Args: []string{"-demo", "-check", "-version"}, Code: 0},
		{Name: "stray argument", Args: []string{"-version", "extra"}, Code: 2},
	})
}
