package main

import (
	"testing"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo/versiontest"
)

// TestVersion: -version prints buildinfo's one line for tmdemo, ending with
// the Go version, and exits 0 without doing anything else; it needs no binaries, and a stray argument is still refused.
func TestVersion(t *testing.T) {
	versiontest.Run(t, "tmdemo", run, []versiontest.Case{
		{Name: "alone", Args: []string{"-version"}, Code: 0},
		{Name: "with -bin", Args: []string{"-version", "-bin", "no-such-dir"}, Code: 0},
		{Name: "stray argument", Args: []string{"-version", "extra"}, Code: 2},
	})
}
