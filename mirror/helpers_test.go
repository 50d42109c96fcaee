package mirror

import (
	"testing"

	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/mirror/webtest"
)

// startServer serves o.Handler with a serve.Server on 127.0.0.1:0 until
// the test ends, and returns the base URL.
func startServer(t testing.TB, o serve.ServerOptions) string {
	t.Helper()
	srv, err := serve.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	return webtest.ServeUntilEnd(t, srv)
}
