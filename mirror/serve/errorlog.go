package serve

import (
	"bytes"
	"context"
	"log"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// handshakePrefix starts net/http's log line of a failed TLS handshake on
// a listener that gives it *tls.Conn connections (crypto/tls's
// NewListener): the only place where the failure is seen.
var handshakePrefix = []byte("http: TLS handshake error")

// errorLog is an http.Server's ErrorLog: its lines at Warn on logger, but
// a failed TLS handshake, which any client that hangs up or speaks
// something else causes, is counted (handshakeErrs, when not nil) and
// logged at Debug only.
func errorLog(logger *slog.Logger, handshakeErrs prometheus.Counter) *log.Logger {
	return log.New(errorWriter{logger, handshakeErrs}, "", 0)
}

type errorWriter struct {
	log           *slog.Logger
	handshakeErrs prometheus.Counter
}

func (w errorWriter) Write(p []byte) (int, error) {
	level := slog.LevelWarn
	if bytes.HasPrefix(p, handshakePrefix) {
		level = slog.LevelDebug
		if w.handshakeErrs != nil {
			w.handshakeErrs.Inc()
		}
	}
	w.log.Log(context.Background(), level, string(bytes.TrimSuffix(p, []byte("\n"))))
	return len(p), nil
}
