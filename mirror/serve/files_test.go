package serve

import (
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/webtest"
)

func TestFileServerRanges(t *testing.T) {
	tr := newTree(t)
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{})})
	resp, _ := webtest.Do(t, webtest.NewRequest(t, "GET", base+"/data.bin", nil))
	tag := resp.Header.Get("Etag")
	tests := []struct {
		name         string
		header       map[string]string
		status       int
		contentRange string
		body         string
	}{
		{"first ten", map[string]string{"Range": "bytes=0-9"}, 206, "bytes 0-9/100", dataBin[:10]},
		{"suffix", map[string]string{"Range": "bytes=-5"}, 206, "bytes 95-99/100", dataBin[95:]},
		{"open end", map[string]string{"Range": "bytes=10-"}, 206, "bytes 10-99/100", dataBin[10:]},
		{"end past size clamped", map[string]string{"Range": "bytes=90-1000"}, 206, "bytes 90-99/100", dataBin[90:]},
		{"unsatisfiable", map[string]string{"Range": "bytes=200-"}, 416, "bytes */100", ""},
		{"unsatisfiable suffix zero", map[string]string{"Range": "bytes=-0"}, 416, "bytes */100", ""},
		{"suffix zero beside another", map[string]string{"Range": "bytes=0-4,-0"}, 206, "bytes 0-4/100", dataBin[:5]},
		{"if-range matches", map[string]string{"Range": "bytes=0-9", "If-Range": tag}, 206, "bytes 0-9/100", dataBin[:10]},
		{"if-range stale", map[string]string{"Range": "bytes=0-9", "If-Range": `"0-0"`}, 200, "", dataBin},
		{"no range", nil, 200, "", dataBin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := webtest.Do(t, webtest.NewRequest(t, "GET", base+"/data.bin", tt.header))
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if got := resp.Header.Get("Content-Range"); got != tt.contentRange {
				t.Errorf("Content-Range %q, want %q", got, tt.contentRange)
			}
			if tt.status == 416 {
				return // the body is the error text
			}
			if body != tt.body {
				t.Errorf("body %q, want %q", body, tt.body)
			}
			if got := resp.Header.Get("Content-Length"); got != strconv.Itoa(len(tt.body)) {
				t.Errorf("Content-Length %q, want %d", got, len(tt.body))
			}
		})
	}
}

func TestFileServerMultipleRanges(t *testing.T) {
	tr := newTree(t)
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{})})
	type part struct{ contentRange, body string }
	tests := []struct {
		name  string
		rng   string
		parts []part
	}{
		{"three", "bytes=0-4,50-54,-3", []part{
			{"bytes 0-4/100", dataBin[0:5]}, {"bytes 50-54/100", dataBin[50:55]}, {"bytes 97-99/100", dataBin[97:]},
		}},
		{"two with open end", "bytes=1-1,98-", []part{
			{"bytes 1-1/100", dataBin[1:2]}, {"bytes 98-99/100", dataBin[98:]},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := webtest.Do(t, webtest.NewRequest(t, "GET", base+"/data.bin", map[string]string{"Range": tt.rng}))
			if resp.StatusCode != http.StatusPartialContent {
				t.Fatalf("status %d, want 206", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Length"); got != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %q, body has %d bytes", got, len(body))
			}
			mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			if err != nil || mt != "multipart/byteranges" {
				t.Fatalf("Content-Type %q (%v), want multipart/byteranges", resp.Header.Get("Content-Type"), err)
			}
			mr := multipart.NewReader(strings.NewReader(body), params["boundary"])
			for i, want := range tt.parts {
				p, err := mr.NextPart()
				if err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
				if got := p.Header.Get("Content-Range"); got != want.contentRange {
					t.Errorf("part %d: Content-Range %q, want %q", i, got, want.contentRange)
				}
				if got := p.Header.Get("Content-Type"); got != "application/octet-stream" {
					t.Errorf("part %d: Content-Type %q", i, got)
				}
				b, err := io.ReadAll(p)
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != want.body {
					t.Errorf("part %d: body %q, want %q", i, b, want.body)
				}
			}
			if _, err := mr.NextPart(); err != io.EOF {
				t.Errorf("after %d parts: %v, want EOF", len(tt.parts), err)
			}
		})
	}
}

func TestFileServerConditional(t *testing.T) {
	tr := newTree(t)
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{})})
	resp, _ := webtest.Do(t, webtest.NewRequest(t, "GET", base+"/data.bin", nil))
	tag := resp.Header.Get("Etag")
	if want := fmt.Sprintf(`"%x-%x"`, dataMtime.UnixNano(), len(dataBin)); tag != want {
		t.Fatalf("ETag %q, want %q", tag, want)
	}
	lastMod := resp.Header.Get("Last-Modified")
	if want := dataMtime.Format(http.TimeFormat); lastMod != want {
		t.Fatalf("Last-Modified %q, want %q", lastMod, want)
	}
	tests := []struct {
		name   string
		method string
		header map[string]string
		status int
		body   string
	}{
		{"if-none-match etag", "GET", map[string]string{"If-None-Match": tag}, 304, ""},
		{"if-none-match weak form", "GET", map[string]string{"If-None-Match": "W/" + tag}, 304, ""},
		{"if-none-match list", "GET", map[string]string{"If-None-Match": `"x", ` + tag}, 304, ""},
		{"if-none-match star", "GET", map[string]string{"If-None-Match": "*"}, 304, ""},
		{"if-none-match other", "GET", map[string]string{"If-None-Match": `"other"`}, 200, dataBin},
		{"if-modified-since same", "GET", map[string]string{"If-Modified-Since": lastMod}, 304, ""},
		{"if-modified-since later", "GET", map[string]string{"If-Modified-Since": dataMtime.Add(time.Hour).Format(http.TimeFormat)}, 304, ""},
		{"if-modified-since stale", "GET", map[string]string{"If-Modified-Since": dataMtime.Add(-time.Hour).Format(http.TimeFormat)}, 200, dataBin},
		{"if-none-match wins over if-modified-since", "GET", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": lastMod}, 200, dataBin},
		{"if-match fails", "GET", map[string]string{"If-Match": `"other"`}, 412, ""},
		{"if-unmodified-since fails", "GET", map[string]string{"If-Unmodified-Since": dataMtime.Add(-time.Hour).Format(http.TimeFormat)}, 412, ""},
		{"head", "HEAD", nil, 200, ""},
		{"head if-none-match", "HEAD", map[string]string{"If-None-Match": tag}, 304, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := webtest.Do(t, webtest.NewRequest(t, tt.method, base+"/data.bin", tt.header))
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status == 412 {
				return
			}
			if body != tt.body {
				t.Errorf("body %q, want %q", body, tt.body)
			}
			if tt.method == "HEAD" && tt.status == 200 {
				if got := resp.Header.Get("Content-Length"); got != strconv.Itoa(len(dataBin)) {
					t.Errorf("HEAD Content-Length %q, want %d", got, len(dataBin))
				}
			}
			if tt.status == 304 && resp.Header.Get("Etag") != tag {
				t.Errorf("304 without the ETag: %q", resp.Header.Get("Etag"))
			}
		})
	}
}

func TestFileServerContentType(t *testing.T) {
	tr := newTree(t)
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{})})
	tests := []struct {
		name string
		path string
		want string
	}{
		{"html", "/types/a.html", "text/html; charset=utf-8"},
		{"css", "/types/a.css", "text/css; charset=utf-8"},
		{"js", "/types/a.js", "text/javascript; charset=utf-8"},
		{"iso", "/types/a.iso", "application/x-iso9660-image"},
		{"txt", "/types/a.txt", "text/plain; charset=utf-8"},
		{"tar.gz", "/types/a.tar.gz", "application/gzip"},
		{"no extension sniffed as text", "/types/notes", "text/plain; charset=utf-8"},
		{"unknown extension sniffed as binary", "/types/plain.bin.unknownext", "application/octet-stream"},
		{"directory index", "/withindex/", "text/html; charset=utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, method := range []string{"GET", "HEAD"} {
				resp, body := webtest.Do(t, webtest.NewRequest(t, method, base+tt.path, nil))
				if resp.StatusCode != 200 {
					t.Fatalf("%s: status %d", method, resp.StatusCode)
				}
				if got := resp.Header.Get("Content-Type"); got != tt.want {
					t.Errorf("%s: Content-Type %q, want %q", method, got, tt.want)
				}
				if got := resp.Header.Get("Content-Encoding"); got != "" {
					t.Errorf("%s: Content-Encoding %q, want none", method, got)
				}
				if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
					t.Errorf("%s: X-Content-Type-Options %q", method, got)
				}
				if resp.Header.Get("Content-Length") == "" {
					t.Errorf("%s: no Content-Length", method)
				}
				if method == "HEAD" && body != "" {
					t.Errorf("HEAD has a body: %q", body)
				}
			}
		})
	}
}

func TestFileServerMethods(t *testing.T) {
	tr := newTree(t)
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{})})
	for _, method := range []string{"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND", "TRACE"} {
		t.Run(method, func(t *testing.T) {
			resp, _ := webtest.Do(t, webtest.NewRequest(t, method, base+"/public.txt", nil))
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("status %d, want 405", resp.StatusCode)
			}
			if got := resp.Header.Get("Allow"); got != "GET, HEAD" {
				t.Errorf("Allow %q, want %q", got, "GET, HEAD")
			}
		})
	}
	t.Run("OPTIONS *", func(t *testing.T) {
		addr := strings.TrimPrefix(base, "http://")
		c := webtest.RawConn(t, addr)
		if _, err := io.WriteString(c, "OPTIONS * HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufioReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("status %d, Allow %q; want 200, GET, HEAD", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
}

func TestFileServerDirectories(t *testing.T) {
	tr := newTree(t)
	plain := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{})})
	listing := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{Listing: true})})
	tests := []struct {
		name     string
		base     string
		method   string
		path     string
		status   int
		location string
		contains []string
		excludes []string
	}{
		{"root index", plain, "GET", "/", 200, "", []string{"root index"}, nil},
		{"no listing by default", plain, "GET", "/dir/", 403, "", nil, []string{"file.txt"}},
		{"no listing by default, HEAD", plain, "HEAD", "/dir/", 403, "", nil, nil},
		{"index served", plain, "GET", "/withindex/", 200, "", []string{"with index"}, nil},
		{"index by name", plain, "GET", "/withindex/index.html", 200, "", []string{"with index"}, nil},
		{"redirect to slash", plain, "GET", "/dir", 301, "./dir/", nil, nil},
		{"redirect keeps query", plain, "GET", "/withindex?x=1&y=2", 301, "./withindex/?x=1&y=2", nil, nil},
		{"redirect nested", plain, "GET", "/a", 301, "./a/", nil, nil},
		{"redirect of .well-known", plain, "GET", "/.well-known", 301, "./.well-known/", nil, nil},
		{"file with slash", plain, "GET", "/public.txt/", 404, "", nil, nil},
		{"missing", plain, "GET", "/nope", 404, "", nil, nil},
		{"missing dir", plain, "GET", "/nope/", 404, "", nil, nil},
		{"through a file", plain, "GET", "/public.txt/x", 404, "", nil, nil},
		{"link inside the root", plain, "GET", "/link-in", 200, "", []string{"public content"}, nil},
		{".well-known served", plain, "GET", "/.well-known/security.txt", 200, "", []string{"Contact:"}, nil},
		{"listing when configured", listing, "GET", "/dir/", 200, "", []string{
			"Index of /dir/", `href="./file.txt"`, ">file.txt<", `href="../"`,
			"&lt;b&gt;&amp;&#34;x&#39;.txt", // the name, escaped for HTML text
			`href="./%3Cb%3E&amp;%22x%27.txt"`,
		}, []string{"<b>", ".hidden", "link-out"}},
		{"listing of another directory", listing, "GET", "/types/", 200, "", []string{"Index of /types/", `href="./a.iso"`, `href="./a.tar.gz"`}, nil},
		{"listing of a link to outside", listing, "GET", "/symlink-out/", 404, "", nil, []string{"secret"}},
		{"listing HEAD", listing, "HEAD", "/dir/", 200, "", nil, nil},
		{"listing prefers index", listing, "GET", "/withindex/", 200, "", []string{"with index"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := webtest.Do(t, webtest.NewRequest(t, tt.method, tt.base+tt.path, nil))
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tt.status, body)
			}
			if got := resp.Header.Get("Location"); got != tt.location {
				t.Errorf("Location %q, want %q", got, tt.location)
			}
			for _, s := range tt.contains {
				if !strings.Contains(body, s) {
					t.Errorf("body does not contain %q:\n%s", s, body)
				}
			}
			for _, s := range tt.excludes {
				if strings.Contains(body, s) {
					t.Errorf("body contains %q:\n%s", s, body)
				}
			}
			if tt.method == "HEAD" && body != "" {
				t.Errorf("HEAD has a body")
			}
			if strings.Contains(body, tr.dir) {
				t.Errorf("body reveals the file system path: %q", body)
			}
		})
	}
	t.Run("redirect resolves to the directory", func(t *testing.T) {
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get(plain + "/withindex")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Request.URL.Path != "/withindex/" || !strings.Contains(string(b), "with index") {
			t.Errorf("followed to %s: %d %q", resp.Request.URL, resp.StatusCode, b)
		}
	})
}

func TestServedFileHidesPath(t *testing.T) {
	tr := newTree(t)
	f, err := os.Open(filepath.Join(tr.root, "public.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // every Seek now fails
	for _, whence := range []int{io.SeekStart, io.SeekEnd} {
		t.Run(strconv.Itoa(whence), func(t *testing.T) {
			_, err := servedFile{f}.Seek(0, whence)
			if err == nil || strings.Contains(err.Error(), tr.dir) {
				t.Errorf("Seek error %v: want one without the path", err)
			}
		})
	}
}
