package main

import (
	"testing"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo/versiontest"
)

// TestVersion: -version prints buildinfo's one line for groupctl, ending with
// the Go version, and exits 0 without doing anything else; it comes before any command.
func TestVersion(t *testing.T) {
	versiontest.Run(t, "groupctl", run, []versiontest.Case{
		{Name: "alone", Args: []string{"-version"}, Code: 0},
		{Name: "before a command", Args: []string{"-server", "http://127.0.0.1:1", "-version", "list"}, Code: 0},
		{Name: "unknown flag", Args: []string{"-version", "-bogus"}, Code: 2},
	})
}
