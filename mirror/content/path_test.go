package content

import (
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	tests := []struct {
		name, path, err string
	}{
		{"file", "a", ""},
		{"nested", "pool/main/a/apt_2.6.1_amd64.deb", ""},
		{"space and percent", "a b/100%", ""},
		{"newline", "a\nb", ""},
		{"utf8", "déjà/vu", ""},
		{"longest", strings.Repeat("a", MaxPathLen), ""},
		{"empty", "", "empty path"},
		{"too long", strings.Repeat("a", MaxPathLen+1), "more than 4096"},
		{"absolute", "/etc/passwd", `element ""`},
		{"dotdot", "a/../b", `element ".."`},
		{"leading dotdot", "../b", `element ".."`},
		{"dot", "./a", `element "."`},
		{"double slash", "a//b", `element ""`},
		{"trailing slash", "a/", `element ""`},
		{"NUL", "a\x00b", "NUL"},
		{"bad utf8", "a\xffb", "UTF-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPath(tc.path)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("checkPath(%q) = %v, want nil", tc.path, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("checkPath(%q) = %v, want %q", tc.path, err, tc.err)
			}
		})
	}
}

func TestEscapePath(t *testing.T) {
	tests := []struct {
		name, path, wire string
	}{
		{"plain", "a/b.deb", "a/b.deb"},
		{"space", "a b", "a%20b"},
		{"percent", "100%", "100%25"},
		{"control", "a\nb\x7f", "a%0Ab%7F"},
		{"utf8 untouched", "é", "é"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(escapePath(nil, tc.path))
			if got != tc.wire {
				t.Fatalf("escapePath(%q) = %q, want %q", tc.path, got, tc.wire)
			}
			back, err := unescapePath([]byte(got))
			if err != nil || back != tc.path {
				t.Fatalf("unescapePath(%q) = %q, %v, want %q", got, back, err, tc.path)
			}
		})
	}
}

func TestUnescapePathRefuses(t *testing.T) {
	tests := []struct{ name, wire, err string }{
		{"truncated", "a%2", "truncated escape"},
		{"lower hex", "a%2f", "bad escape"},
		{"not hex", "a%zz", "bad escape"},
		{"raw space", "a b", "unescaped byte"},
		{"raw tab after escape", "%20\t", "unescaped byte"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := unescapePath([]byte(tc.wire)); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("unescapePath(%q) = %v, want %q", tc.wire, err, tc.err)
			}
		})
	}
}

func TestRequestPath(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{"a file", "/dists/stable/InRelease", "dists/stable/InRelease", ""},
		{"cleaned", "//pool/./a.deb", "pool/a.deb", ""},
		{"relative", "pool/a.deb", "", "must start with /"},
		{"dot dot", "/pool/../etc/passwd", "", `element ".."`},
		{"NUL", "/a\x00b", "", "NUL"},
		{"the root", "/", "", "names no file"},
		{"not UTF-8", "/\xff", "", "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RequestPath(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("RequestPath(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("RequestPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}
