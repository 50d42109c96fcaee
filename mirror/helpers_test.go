package mirror

import (
	"context"
	"net"
	"testing"

	"github.com/transmirror/transmirror/mirror/serve"
)

// startServer serves o.Handler with a serve.Server on 127.0.0.1:0 until
// the test ends, and returns the base URL.
func startServer(t testing.TB, o serve.ServerOptions) string {
	t.Helper()
	srv, err := serve.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
