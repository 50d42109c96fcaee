package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestExplain: a request that ran out of time is explained by what a
// connection to the endpoint shows (refused, a server certificate not
// trusted, a client certificate the server wants), and left as it is
// when the connection shows nothing wrong or the error is another.
func TestExplain(t *testing.T) {
	quiet := log.New(io.Discard, "", 0) // the handshakes that fail on purpose
	ok := httptest.NewUnstartedServer(http.NotFoundHandler())
	ok.Config.ErrorLog = quiet
	ok.StartTLS()
	defer ok.Close()
	wantsCert := httptest.NewUnstartedServer(http.NotFoundHandler())
	wantsCert.Config.ErrorLog = quiet
	wantsCert.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	wantsCert.StartTLS()
	defer wantsCert.Close()
	trusted := x509.NewCertPool()
	trusted.AddCert(ok.Certificate())
	trusted.AddCert(wantsCert.Certificate())
	refused := "http://" + probetest.FreeAddr(t, "tcp")
	timedOut := fmt.Errorf("lease: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name     string
		err      error
		endpoint string
		roots    *x509.CertPool
		want     string // in the explained error; "" leaves err as it is
	}{
		{"another error", errors.New("etcdserver: permission denied"), refused, nil, ""},
		{"connection refused", timedOut, refused, nil, "connection refused"},
		{"server certificate not trusted", timedOut, ok.URL, x509.NewCertPool(), "certificate signed by unknown authority"},
		{"client certificate wanted", timedOut, wantsCert.URL, trusted, "remote error: tls: "},
		{"nothing wrong", timedOut, ok.URL, trusted, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := explain(tc.err, clientv3.Config{Endpoints: []string{tc.endpoint},
				TLS: &tls.Config{RootCAs: tc.roots, MinVersion: tls.VersionTLS12}})
			if !errors.Is(got, tc.err) {
				t.Errorf("explained %v does not wrap %v", got, tc.err)
			}
			if tc.want == "" && got.Error() != tc.err.Error() || tc.want != "" && !strings.Contains(got.Error(), tc.want) {
				t.Errorf("explained %q, want %q in it (none: %q as it is)", got, tc.want, tc.err)
			}
		})
	}
}
