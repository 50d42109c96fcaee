package main

import (
	"testing"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo/versiontest"
)

// TestVersion: -version prints buildinfo's one line for mirror, ending with
// the Go version, and exits 0 without doing anything else; a stray argument is still refused.
func TestVersion(t *testing.T) {
	versiontest.Run(t, "mirror", run, []versiontest.Case{
		{Name: "alone", Args: []string{"-version"}, Code: 0},
		{Name: "without -config", Args: []string{"-version", "-listen", "127.0.0.1:0"}, Code: 0},
		{Name: "stray argument", Args: []string{"-version", "extra"}, Code: 2},
	})
}
