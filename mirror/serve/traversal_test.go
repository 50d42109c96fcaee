package serve

import (
	"strings"
	"testing"
)

// TestFileServerTraversal sends hostile request targets byte for byte and
// checks that each is refused with a 4xx and that no response shows
// anything from outside the root, a hidden file or a file system path.
func TestFileServerTraversal(t *testing.T) {
	tr := newTree(t)
	for _, listing := range []bool{false, true} {
		fs := tr.fileServer(t, FileServerOptions{Listing: listing})
		addr := strings.TrimPrefix(startServer(t, ServerOptions{Handler: fs}), "http://")
		tests := []struct {
			name   string
			target string
			status int // 0: any 4xx
		}{
			{"dotdot", "/../secret", 400},
			{"encoded dotdot", "/%2e%2e/secret", 400},
			{"encoded dotdot upper", "/%2E%2E/secret", 400},
			{"encoded dotdot and slash", "/%2e%2e%2fsecret", 400},
			{"nested encoded dotdot", "/a/%2e%2e/%2e%2e/secret", 400},
			{"dotdot encoded slash", "/..%2fsecret", 400},
			{"dotdot encoded backslash", "/..%5csecret", 400},
			{"encoded backslashes", "/%5c..%5csecret", 400},
			{"raw backslash", `/..\secret`, 400},
			{"double encoded", "/%252e%252e/secret", 404},
			{"double slash", "//etc/passwd", 404},
			{"double slash to root", "//secret", 404},
			{"dotdot after dir", "/a/../../secret", 400},
			{"half encoded", "/.%2e/secret", 400},
			{"raw NUL", "/\x00", 400},
			{"encoded NUL", "/public.txt%00.html", 400},
			{"symlink to a directory outside", "/symlink-out/secret", 404},
			{"symlink to a directory outside, dir", "/symlink-out/", 404},
			{"symlink to a file outside", "/symlink-file", 404},
			{"symlink in a subdirectory", "/dir/link-out", 404},
			{"tomcat semicolon", "/..;/secret", 404},
			{"overlong UTF-8 dots", "/%c0%ae%c0%ae/secret", 400},
			{"overlong UTF-8 slash", "/..%c0%afsecret", 400},
			{"invalid UTF-8", "/%ff", 400},
			{"git config", "/.git/config", 404},
			{"git dir", "/.git/", 404},
			{"htaccess", "/a/.htaccess", 404},
			{"hidden in listing dir", "/dir/.hidden", 404},
			{"trailing dotdot to a dot-file", "/a/../.git/config", 404},
			{"bare dotdot", "/..", 400},
			{"dotdot above the root after slashes", "//a/..//../secret", 400},
			{"dot then dotdot", "/./../secret", 400},
			{"triple dot", "/.../secret", 404},
			{"windows drive", "/C:/Windows/win.ini", 400},
			{"windows drive backslash", "/c:%5cwindows%5cwin.ini", 400},
			{"well-known escape", "/.well-known/../../secret", 400},
			{"absolute form", "http://test/../secret", 400},
			{"percent-u", "/%u002e%u002e/secret", 400},
			{"control character", "/public%0a.txt", 400},
			{"encoded slash to a real file", "/a%2fb.txt", 400},
			{"long segment", "/" + strings.Repeat("a", 300), 400},
			{"long path", "/" + strings.Repeat("a/", 2100), 400},
		}
		for _, tt := range tests {
			name := tt.name
			if listing {
				name += " with listing"
			}
			t.Run(name, func(t *testing.T) {
				resp, body := rawGet(t, addr, tt.target)
				if resp.StatusCode < 400 || resp.StatusCode > 499 {
					t.Errorf("status %d, want 4xx", resp.StatusCode)
				}
				if tt.status != 0 && resp.StatusCode != tt.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
				}
				for _, secret := range []string{secretOutside, secretGit, secretDotfile, "root:x:0", tr.dir} {
					if strings.Contains(body, secret) {
						t.Errorf("body reveals %q: %q", secret, body)
					}
				}
			})
		}
		// Controls: the same server does serve what is inside.
		for _, target := range []string{"/public.txt", "/a/b.txt", "/link-in", "/.well-known/security.txt", "/pub%6cic.txt",
			// Normalized as nginx does: dot segments, empty segments, a .. inside.
			"/./public.txt", "/a/../public.txt", "//public.txt", "/a/./b.txt", "/a//b.txt", "/dir/../a/b.txt",
			// Absolute-form, as apt sends it to a mirror it uses as its proxy.
			"http://test/public.txt", "http://test/./public.txt", "http://test/a/../a/b.txt"} {
			t.Run("control "+target, func(t *testing.T) {
				if resp, body := rawGet(t, addr, target); resp.StatusCode != 200 || body == "" {
					t.Errorf("status %d, body %q", resp.StatusCode, body)
				}
			})
		}
	}
}
