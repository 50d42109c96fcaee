package serve

import (
	"errors"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanPath(t *testing.T) {
	tests := []struct {
		name    string
		escaped string
		want    string
		isDir   bool
		err     error
	}{
		{"root", "/", ".", true, nil},
		{"file", "/a/b.iso", "a/b.iso", false, nil},
		{"dir", "/a/b/", "a/b", true, nil},
		{"escaped space", "/a%20b", "a b", false, nil},
		{"escaped letter", "/%61", "a", false, nil},
		{"plus kept", "/a+b", "a+b", false, nil},
		{"utf-8", "/%C3%A9t%C3%A9", "été", false, nil},
		{"double encoded is literal", "/%252e%252e/x", "%2e%2e/x", false, nil},
		{"well-known", "/.well-known/acme-challenge/x", ".well-known/acme-challenge/x", false, nil},
		{"dots inside a name", "/a..b/c.", "a..b/c.", false, nil},
		{"colon not a drive", "/ab:/c", "ab:/c", false, nil},
		{"empty", "", "", false, ErrBadPath},
		{"relative", "a/b", "", false, ErrBadPath},
		{"double slash merged", "//a", "a", false, nil},
		{"inner double slash merged", "/a//b", "a/b", false, nil},
		{"dot removed", "/./a", "a", false, nil},
		{"flat apt repository", "/debian/./Release", "debian/Release", false, nil},
		{"dotdot inside the root", "/a/../b", "b", false, nil},
		{"trailing dot is a directory", "/a/.", "a", true, nil},
		{"trailing dotdot to the root", "/a/..", ".", true, nil},
		{"only slashes", "///", ".", true, nil},
		{"dotdot over a dot-file", "/.git/../a", "a", false, nil},
		{"dotdot to a dot-file", "/a/../.git", "", false, ErrHiddenPath},
		{"bare dotdot", "/..", "", false, ErrBadPath},
		{"dotdot above the root", "/a/../../b", "", false, ErrBadPath},
		{"dotdot after merged slashes", "//..//b", "", false, ErrBadPath},
		{"encoded dot", "/%2e/a", "", false, ErrBadPath},
		{"half encoded dotdot", "/.%2e/a", "", false, ErrBadPath},
		{"encoded dotdot after a name", "/a/%2e%2e", "", false, ErrBadPath},
		{"encoded slash in a removed segment", "/a%2fb/../c", "", false, ErrBadPath},
		{"encoded dotdot", "/%2e%2E", "", false, ErrBadPath},
		{"encoded slash", "/a%2Fb", "", false, ErrBadPath},
		{"encoded backslash", "/a%5cb", "", false, ErrBadPath},
		{"backslash", `/a\b`, "", false, ErrBadPath},
		{"NUL", "/a\x00", "", false, ErrBadPath},
		{"encoded NUL", "/a%00", "", false, ErrBadPath},
		{"DEL", "/a%7f", "", false, ErrBadPath},
		{"C1 control", "/a%c2%85", "", false, ErrBadPath},
		{"bad escape", "/a%zz", "", false, ErrBadPath},
		{"truncated escape", "/a%2", "", false, ErrBadPath},
		{"overlong", "/%c0%ae", "", false, ErrBadPath},
		{"invalid UTF-8", "/%80", "", false, ErrBadPath},
		{"drive", "/C:", "", false, ErrBadPath},
		{"drive in a subdirectory", "/a/c:/b", "", false, ErrBadPath},
		{"long segment", "/" + strings.Repeat("x", 256), "", false, ErrBadPath},
		{"long path", "/" + strings.Repeat("x/", 2048), "", false, ErrBadPath},
		{"dot-file", "/.git/config", "", false, ErrHiddenPath},
		{"encoded dot-file", "/%2egit", "", false, ErrHiddenPath},
		{"nested dot-file", "/a/.htpasswd", "", false, ErrHiddenPath},
		{"well-known not first", "/a/.well-known/x", "", false, ErrHiddenPath},
		{"dot-file in well-known", "/.well-known/.x", "", false, ErrHiddenPath},
		{"semicolon dotdot", "/..;/x", "", false, ErrHiddenPath},
		{"triple dot", "/...", "", false, ErrHiddenPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, isDir, err := CleanPath(tt.escaped)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("CleanPath(%q) error %v, want %v", tt.escaped, err, tt.err)
			}
			if got != tt.want || isDir != tt.isDir {
				t.Errorf("CleanPath(%q) = %q, %v; want %q, %v", tt.escaped, got, isDir, tt.want, tt.isDir)
			}
		})
	}
}

// FuzzCleanPath checks that whatever CleanPath accepts stays inside the
// root: a local, clean, slash-separated name with no dot segments, no
// hidden segments, no backslashes or control characters, valid UTF-8,
// the same from its NormalizePath form, and stable when escaped and
// cleaned again.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/", "/a/b/", "/../x", "/%2e%2e/x", "/.well-known/x", "/a%2fb", "/debian/./Release", "//a/../b/", "/a/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, escaped string) {
		name, isDir, err := CleanPath(escaped)
		if err != nil {
			if !errors.Is(err, ErrBadPath) && !errors.Is(err, ErrHiddenPath) {
				t.Fatalf("CleanPath(%q): unexpected error kind %v", escaped, err)
			}
			if name != "" {
				t.Fatalf("CleanPath(%q) returned %q with an error", escaped, name)
			}
			return
		}
		norm, nerr := NormalizePath(escaped)
		if nerr != nil {
			t.Fatalf("CleanPath(%q) accepted what NormalizePath refuses: %v", escaped, nerr)
		}
		if name == "." {
			if norm != "/" || !isDir {
				t.Fatalf("CleanPath(%q) = %q, %v: only what normalizes to / is the root (%q)", escaped, name, isDir, norm)
			}
			return
		}
		// The normalized path names the same thing, and is its own
		// normal form.
		if name2, isDir2, err := CleanPath(norm); err != nil || name2 != name || isDir2 != isDir {
			t.Fatalf("CleanPath(%q) = %q, %v; from its normal form %q: %q, %v, %v", escaped, name, isDir, norm, name2, isDir2, err)
		}
		if again, err := NormalizePath(norm); err != nil || again != norm {
			t.Fatalf("NormalizePath(%q) = %q, again %q, %v", escaped, norm, again, err)
		}
		switch {
		case name == "", strings.HasPrefix(name, "/"), strings.HasSuffix(name, "/"):
			t.Fatalf("CleanPath(%q) = %q: empty or slash at an end", escaped, name)
		case !utf8.ValidString(name):
			t.Fatalf("CleanPath(%q) = %q: invalid UTF-8", escaped, name)
		case strings.ContainsAny(name, "\\\x00"):
			t.Fatalf("CleanPath(%q) = %q: backslash or NUL", escaped, name)
		case !filepath.IsLocal(filepath.FromSlash(name)):
			t.Fatalf("CleanPath(%q) = %q: not local", escaped, name)
		case path.Clean(name) != name:
			t.Fatalf("CleanPath(%q) = %q: not clean (%q)", escaped, name, path.Clean(name))
		}
		segs := strings.Split(name, "/")
		for i, seg := range segs {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("CleanPath(%q) = %q: segment %q", escaped, name, seg)
			}
			if strings.HasPrefix(seg, ".") && (i > 0 || seg != ".well-known") {
				t.Fatalf("CleanPath(%q) = %q: hidden segment %q", escaped, name, seg)
			}
			for _, c := range seg {
				if c < 0x20 || c == 0x7f {
					t.Fatalf("CleanPath(%q) = %q: control character", escaped, name)
				}
			}
		}
		// Escaping the result and cleaning it again gives it back.
		again := "/" + strings.Join(mapSlice(segs, url.PathEscape), "/")
		if isDir {
			again += "/"
		}
		name2, isDir2, err := CleanPath(again)
		if err != nil || name2 != name || isDir2 != isDir {
			t.Fatalf("CleanPath(%q) = %q, %v; again from %q: %q, %v, %v", escaped, name, isDir, again, name2, isDir2, err)
		}
	})
}

func TestNormalizePath(t *testing.T) {
	tests := []struct {
		name    string
		escaped string
		want    string
		err     bool
	}{
		{"root", "/", "/", false},
		{"kept", "/a/b%20c", "/a/b%20c", false},
		{"kept directory", "/a/b/", "/a/b/", false},
		{"flat apt repository", "/debian/./Release", "/debian/Release", false},
		{"flat apt repository, Packages.xz", "/debian/./Packages.xz", "/debian/Packages.xz", false},
		{"merged slashes", "//a///b", "/a/b", false},
		{"dotdot inside", "/a/b/../c", "/a/c", false},
		{"trailing dot", "/a/.", "/a/", false},
		{"trailing dotdot", "/a/b/..", "/a/", false},
		{"to the root", "/a/..", "/", false},
		{"escapes kept as they came", "/%61/./b", "/%61/b", false},
		{"leaves the root", "/..", "", true},
		{"leaves the root later", "/a/../../b", "", true},
		{"encoded dotdot", "/a/%2E%2E/b", "", true},
		{"encoded dot", "/a/%2e", "", true},
		{"relative", "a", "", true},
		{"absolute form", "http://h/a", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormalizePath(tt.escaped)
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("NormalizePath(%q) = %q, %v; want %q, error %v", tt.escaped, got, err, tt.want, tt.err)
			}
			if err != nil && !errors.Is(err, ErrBadPath) {
				t.Errorf("error %v is not ErrBadPath", err)
			}
		})
	}
}

func mapSlice(s []string, f func(string) string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = f(v)
	}
	return out
}
