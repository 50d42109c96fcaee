package serve

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestErrorLog: a failed TLS handshake is counted and logged at Debug;
// every other line of the HTTP server at Warn.
func TestErrorLog(t *testing.T) {
	tests := []struct {
		name, line, level string
		counted           float64
	}{
		{"handshake", "http: TLS handshake error from 192.0.2.1:4321: EOF\n", "DEBUG", 1},
		{"not TLS", "http: TLS handshake error from 192.0.2.1:4321: tls: first record does not look like a TLS handshake\n", "DEBUG", 1},
		{"other", "http: Accept error: too many open files; retrying in 5ms\n", "WARN", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: "c"})
			l := errorLog(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), c)
			l.Print(tt.line)
			if got := testutil.ToFloat64(c); got != tt.counted {
				t.Errorf("counted %g, want %g", got, tt.counted)
			}
			if s := out.String(); !strings.Contains(s, "level="+tt.level) || !strings.Contains(s, strings.TrimSpace(tt.line[:20])) {
				t.Errorf("logged %q, want level %s", s, tt.level)
			}
		})
	}
	errorLog(slog.New(slog.DiscardHandler), nil).Print("http: TLS handshake error from x: EOF") // no metrics: no panic
}
