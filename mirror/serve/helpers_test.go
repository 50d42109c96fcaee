package serve

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/webtest"
)

// Markers written into files that must never be served.
const (
	secretOutside = "TOP-SECRET-OUTSIDE-THE-ROOT"
	secretGit     = "GIT-CONFIG-SECRET"
	secretDotfile = "HTACCESS-SECRET"
)

// tree is a document root in a temporary directory, with secrets beside
// it and hidden files in it.
type tree struct {
	dir  string // the temporary directory: secret, outside/, root/
	root string
}

// newTree builds:
//
//	secret               (outside the root)
//	outside/secret       (outside the root)
//	root/index.html
//	root/public.txt
//	root/data.bin        100 bytes "0123456789"×10, mtime fixed
//	root/a/b.txt
//	root/dir/file.txt    (no index.html)
//	root/dir/<b>&"x'.txt
//	root/dir/.hidden
//	root/dir/link-out -> ../../secret
//	root/withindex/index.html
//	root/.git/config
//	root/a/.htaccess
//	root/.well-known/security.txt
//	root/symlink-out  -> ../outside
//	root/symlink-file -> ../secret
//	root/link-in      -> public.txt
//	root/types/a.html a.css a.js a.iso a.txt a.tar.gz notes plain.bin
func newTree(t testing.TB) *tree {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	files := map[string]string{
		"secret":                          secretOutside,
		"outside/secret":                  secretOutside,
		"root/index.html":                 "<!DOCTYPE html><title>root index</title>",
		"root/public.txt":                 "public content\n",
		"root/data.bin":                   dataBin,
		"root/a/b.txt":                    "b\n",
		"root/dir/file.txt":               "file in dir\n",
		"root/dir/<b>&\"x'.txt":           "odd name\n",
		"root/dir/.hidden":                secretDotfile,
		"root/withindex/index.html":       "<!DOCTYPE html><title>with index</title>",
		"root/.git/config":                secretGit,
		"root/a/.htaccess":                secretDotfile,
		"root/.well-known/security.txt":   "Contact: mailto:security@example.org\n",
		"root/types/a.html":               "<p>hi</p>",
		"root/types/a.css":                "p{}",
		"root/types/a.js":                 "let a;",
		"root/types/a.iso":                "\x00\x00\x00\x00CD001",
		"root/types/a.txt":                "text",
		"root/types/a.tar.gz":             "\x1f\x8b\x08\x00\x00\x00\x00\x00",
		"root/types/notes":                "plain text without an extension\n",
		"root/types/plain.bin.unknownext": "\x00\x01\x02\x03binary",
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"root/symlink-out":  "../outside",
		"root/symlink-file": "../secret",
		"root/link-in":      "public.txt",
		"root/dir/link-out": "../../secret",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(filepath.Join(root, "data.bin"), dataMtime, dataMtime); err != nil {
		t.Fatal(err)
	}
	return &tree{dir: dir, root: root}
}

const dataBin = "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"

var dataMtime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// fileServer returns a FileServer for the tree's root, closed at cleanup.
func (tr *tree) fileServer(t testing.TB, o FileServerOptions) *FileServer {
	t.Helper()
	fs, err := NewFileServer(tr.root, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs
}

// startServer serves h with a Server on 127.0.0.1:0 until the test ends,
// and returns the base URL.
func startServer(t testing.TB, o ServerOptions) string {
	t.Helper()
	srv, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	return webtest.ServeUntilEnd(t, srv)
}

// rawGet sends "GET target HTTP/1.1" exactly as given, bypassing the
// client's path cleaning, and returns the response with its body read.
func rawGet(t testing.TB, addr, target string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %q: %v", target, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("GET %q: body: %v", target, err)
	}
	return resp, string(body)
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
