package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemoConfigIsValid checks the embedded demo the way -check does: the
// demo must always load, GeoIP database included.
func TestDemoConfigIsValid(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-demo", "-check"}, &out, &errb); code != 0 {
		t.Fatalf("dnsd -demo -check: exit %d\n%s", code, errb.String())
	}
	if !strings.Contains(out.String(), "ok: 1 zones, 1 groups") {
		t.Errorf("output %q", out.String())
	}
}

func TestFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no mode", nil, 2, "give exactly one of"},
		{"two modes", []string{"-demo", "-config", "x.yaml"}, 2, "give exactly one of"},
		{"stray argument", []string{"-demo", "extra"}, 2, `unexpected argument "extra"`},
		{"bad log format", []string{"-demo", "-log-format", "xml"}, 2, "-log-format"},
		{"bad zone flag", []string{"-listen", "127.0.0.1:0", "-zone", "nofile", "-check"}, 1, "want ORIGIN=FILE"},
		{"missing config", []string{"-config", "does-not-exist.yaml", "-check"}, 1, "does-not-exist.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tc.args, &out, &errb); code != tc.code {
				t.Errorf("exit %d, want %d (%s)", code, tc.code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
		})
	}
}
