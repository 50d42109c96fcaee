package proxyprotocol

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// FuzzReadHeader: whatever a trusted peer sends, readHeader ends (within
// its deadline), counts one of the results, serves only a connection
// that began with a PROXY signature, and one that it serves reads exactly
// what followed the header.
func FuzzReadHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\nGET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte("PROXY TCP6 2001:db8::1 2001:db8::2 4000 443\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\nx"))
	f.Add(append(v2(proxyproto.PROXY, "203.0.113.7:1234"), "GET /"...))
	f.Add(v2(proxyproto.LOCAL, "203.0.113.7:1234"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte("PROXY TCP4 nonsense\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		server, client := net.Pipe()
		defer server.Close()
		go func() {
			client.Write(data)
			client.Close()
		}()
		c, result := readHeader(server, time.Second)
		valid := false
		for _, r := range Results {
			valid = valid || r == result
		}
		if !valid || result == Untrusted {
			t.Fatalf("result %q", result)
		}
		if c == nil {
			if result == Accepted || result == Local {
				t.Fatalf("%s without a connection", result)
			}
			return
		}
		if !startsWithHeader(data) && !bytes.HasPrefix(data, []byte("PROXY")) {
			t.Fatalf("served %q as %s: no signature", data, result)
		}
		rest, err := io.ReadAll(c)
		if err != nil || !bytes.HasSuffix(data, rest) || len(rest) == len(data) {
			t.Fatalf("after the header read %q (%v) of %q", rest, err, data)
		}
	})
}
