package main

import (
	"testing"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo/versiontest"
)

// TestVersion: -version prints buildinfo's one line for groupsim, ending with
// the Go version, and exits 0 without doing anything else; a stray argument is still refused.
func TestVersion(t *testing.T) {
	versiontest.Run(t, "groupsim", run, []versiontest.Case{
		{Name: "alone", Args: []string{"-version"}, Code: 0},
		{Name: "with other flags", Args: []string{"-version", "-requests", "10"}, Code: 0},
		{Name: "stray argument", Args: []string{"-version", "extra"}, Code: 2},
	})
}
