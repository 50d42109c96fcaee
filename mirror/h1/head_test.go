package h1

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

func TestReadHead(t *testing.T) {
	tests := []struct {
		name, in string
		status   int
		length   int64
		chunked  bool
		close    bool
		fields   int
		err      error
	}{
		{"200 with a length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello", 200, 5, false, false, 2, nil},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n", 200, 0, false, false, 1, nil},
		{"no reason phrase", "HTTP/1.1 204\r\n\r\n", 204, -1, false, false, 0, nil},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 200, -1, true, false, 1, nil},
		{"chunked and a length: chunked, not reused", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 200, -1, true, true, 2, nil},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n", 200, 0, false, true, 2, nil},
		{"HTTP/1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 200, 0, false, true, 1, nil},
		{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", 200, 0, false, false, 2, nil},
		{"interim responses skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", 304, -1, false, false, 1, nil},
		{"empty lines before the status line", "\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 200, 0, false, false, 1, nil},
		{"same length twice", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n", 200, 2, false, false, 2, nil},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"signed length", "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"gzip transfer coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"folded field", "HTTP/1.1 200 OK\r\nX-A: 1\r\n  2\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"NUL in a value", "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"bare CR in a value", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"tab and control bytes past CR in a value", "HTTP/1.1 200 OK\r\nX-A: a\tb\x0e\x1f\r\nContent-Length: 0\r\n\r\n", 200, 0, false, false, 2, nil},
		{"space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"not HTTP/1", "HTTP/2.0 200 OK\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"short status", "HTTP/1.1 20 OK\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"status glued to the reason", "HTTP/1.1 200OK\r\n\r\n", 0, 0, false, false, 0, ErrHead},
		{"too large", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("a", 1000)+"\r\n", 70) + "\r\n", 0, 0, false, false, 0, ErrHeadTooLarge},
		{"a line over the buffer", "HTTP/1.1 200 OK\r\nX-Pad: " + strings.Repeat("a", 40<<10) + "\r\n\r\n", 0, 0, false, false, 0, ErrHeadTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Response
			err := readHead(bufio.NewReaderSize(strings.NewReader(tt.in), readBufferSize), &r)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("error %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tt.status || r.ContentLength != tt.length || r.Chunked != tt.chunked || r.Close != tt.close || len(r.Fields) != tt.fields {
				t.Errorf("status %d length %d chunked %v close %v fields %d; want %d %d %v %v %d",
					r.Status, r.ContentLength, r.Chunked, r.Close, len(r.Fields), tt.status, tt.length, tt.chunked, tt.close, tt.fields)
			}
		})
	}
}

func TestConnectionOptions(t *testing.T) {
	var r Response
	in := "HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"
	if err := readHead(bufio.NewReader(strings.NewReader(in)), &r); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Connection(), ","); got != "close,x-hop,keep-alive" {
		t.Errorf("Connection() = %q", got)
	}
}

// FuzzReadHead: any bytes give a head or an error, never a panic, and a
// head's framing is consistent: a length or chunked, never both.
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 204\r\nConnection: keep-alive\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
		"HTTP/1.1 200 OK\nX: y\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Response
		if err := readHead(bufio.NewReaderSize(strings.NewReader(string(in)), 4096), &r); err != nil {
			return
		}
		if r.Chunked && r.ContentLength != -1 {
			t.Errorf("chunked with a length %d", r.ContentLength)
		}
		if r.Status < 200 && r.Status != 101 {
			t.Errorf("interim status %d returned", r.Status)
		}
		for _, fl := range r.Fields {
			if !isToken(fl.Name) || strings.ContainsAny(fl.Value, "\r\n\x00") {
				t.Errorf("field %q: %q", fl.Name, fl.Value)
			}
		}
	})
}

func TestWholeHead(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"whole", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", true},
		{"whole, bare LFs", "GET / HTTP/1.1\nHost: x\n\n", true},
		{"whole with a body after it", "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab", true},
		{"no fields", "GET / HTTP/1.0\r\n\r\n", true},
		{"fields cut off", "GET / HTTP/1.1\r\nHost: x\r\n", false},
		{"a field cut off", "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ab", false},
		{"request line cut off", "GET /some/long/path HTTP/1.", false},
		{"CR without LF", "GET / HTTP/1.1\r\nHost: x\r\n\r", false},
		{"empty lines first", "\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n", false},
		{"too short to say", "GET /\n\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wholeHead([]byte(tt.in)); got != tt.want {
				t.Errorf("wholeHead(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
