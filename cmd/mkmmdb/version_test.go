package main

import (
	"testing"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo/versiontest"
)

// TestVersion: -version prints buildinfo's one line for mkmmdb, ending with
// the Go version, and exits 0 without doing anything else; it needs neither -in nor -out, and a stray argument is still refused.
func TestVersion(t *testing.T) {
	versiontest.Run(t, "mkmmdb", run, []versiontest.Case{
		{Name: "alone", Args: []string{"-version"}, Code: 0},
		{Name: "with -type", Args: []string{"-version", "-type", "GeoLite2-Country"}, Code: 0},
		{Name: "stray argument", Args: []string{"-version", "extra"}, Code: 2},
	})
}
