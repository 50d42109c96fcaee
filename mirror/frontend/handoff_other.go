//go:build !unix

package frontend

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/transmirror/transmirror/scheduler/site"
)

// errNoHandoff is returned where Unix sockets cannot carry descriptors.
var errNoHandoff = errors.New("frontend: handoff: not supported on this system")

// serveHandoff proxies: connection handoff needs Unix sockets.
func (h *handler) serveHandoff(w http.ResponseWriter, r *http.Request, req site.Request, _ *slot) {
	h.m.handoffs.WithLabelValues(handoffFallback).Inc()
	h.serveProxy(w, r, req)
}

// ListenHandoff returns an error: connection handoff needs Unix sockets.
func ListenHandoff(path string) (net.Listener, error) { return nil, errNoHandoff }

// stopFollowing does nothing: no handoff is followed here.
func (h *handler) stopFollowing() {}

// HandoffConnContext returns ctx: there are no handed-off connections here.
func HandoffConnContext(ctx context.Context, _ net.Conn) context.Context { return ctx }

// ReportHandoffs returns next: there are no handed-off connections here.
func ReportHandoffs(next http.Handler) http.Handler { return next }
