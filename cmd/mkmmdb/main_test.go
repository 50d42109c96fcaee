package main

import (
	"bytes"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/scheduler/geo"
)

const table = `network,country,continent,lat,lon
198.51.100.0/25,DE,EU,50.11,8.68
2001:db8:3::/48,SG,AS,1.35,103.82
`

func TestRun(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.csv")
	bad := filepath.Join(dir, "bad.csv")
	files := map[string]string{
		good: table,
		bad:  "network,country,continent,lat,lon\n10.0.0.0/8,DE,EU,,\n10.0.0.1/8,DE,EU,,\n",
	}
	for name, body := range files {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := func(name string) string { return filepath.Join(dir, name) }

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string // in stderr
		wantDB   string // database type of -out, when it must exist
	}{
		{"city", []string{"-in", good, "-out", out("city.mmdb")}, 0, "", geo.TypeCity},
		{"country", []string{"-in", good, "-out", out("country.mmdb"), "-type", "GeoLite2-Country"}, 0, "", "GeoLite2-Country"},
		{"help", []string{"-h"}, 0, "usage: mkmmdb", ""},
		{"no flags", nil, 2, "usage: mkmmdb", ""},
		{"no out", []string{"-in", good}, 2, "usage: mkmmdb", ""},
		{"stray argument", []string{"-in", good, "-out", out("x.mmdb"), "extra"}, 2, "usage: mkmmdb", ""},
		{"unknown flag", []string{"-bogus"}, 2, "flag provided but not defined", ""},
		{"bad table names the line", []string{"-in", bad, "-out", out("bad.mmdb")}, 1, "bad.csv: geo: line 3: network 10.0.0.1/8: host bits set", ""},
		{"missing table", []string{"-in", out("missing.csv"), "-out", out("m.mmdb")}, 1, "mkmmdb: open ", ""},
		{"unsupported type", []string{"-in", good, "-out", out("asn.mmdb"), "-type", "GeoLite2-ASN"}, 1, `unsupported database type "GeoLite2-ASN"`, ""},
		{"unwritable output", []string{"-in", good, "-out", filepath.Join(dir, "no", "such", "dir.mmdb")}, 1, "mkmmdb: ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tt.args, io.Discard, &stderr); code != tt.wantCode {
				t.Errorf("run(%q) = %d, want %d; stderr:\n%s", tt.args, code, tt.wantCode, &stderr)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr %q does not contain %q", &stderr, tt.wantErr)
			}
			if tt.wantDB == "" {
				return
			}
			l, err := geo.NewLocator(geo.Options{MMDB: tt.args[3]})
			if err != nil {
				t.Fatalf("NewLocator: %v", err)
			}
			defer l.Close()
			if got := l.DatabaseType(); got != tt.wantDB {
				t.Errorf("DatabaseType() = %q, want %q", got, tt.wantDB)
			}
			if got := l.Locate(netip.MustParsePrefix("2001:db8:3::/56")); got.Loc.Country != "SG" || got.Source != geo.SourceMMDB {
				t.Errorf("Locate = %+v, want SG from the database", got)
			}
		})
	}
}

// TestRunLeavesNoTemporaryFiles checks that the output is renamed into
// place and nothing else is left beside it.
func TestRunLeavesNoTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(in, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	for range 2 { // the second run replaces the first output
		if code := run([]string{"-in", in, "-out", filepath.Join(dir, "t.mmdb")}, io.Discard, &stderr); code != 0 {
			t.Fatalf("run = %d: %s", code, &stderr)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "t.csv t.mmdb" {
		t.Errorf("files = %s, want t.csv t.mmdb", got)
	}
}
