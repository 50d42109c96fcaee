//go:build !unix

package frontend

import (
	"errors"
	"net"
	"net/http"

	"github.com/transmirror/transmirror/scheduler/site"
)

// errNoHandoff is returned where Unix sockets cannot carry descriptors.
var errNoHandoff = errors.New("frontend: handoff: not supported on this system")

// serveHandoff proxies: connection handoff needs Unix sockets.
func (h *handler) serveHandoff(w http.ResponseWriter, r *http.Request, req site.Request) {
	h.m.handoffs.WithLabelValues(handoffFallback).Inc()
	h.serveProxy(w, r, req)
}

// ListenHandoff returns an error: connection handoff needs Unix sockets.
func ListenHandoff(path string) (net.Listener, error) { return nil, errNoHandoff }
