package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestAfterLeave: the hook runs when the client leaves while the handler
// waits, and not when it stays; Stop says which.
func TestAfterLeave(t *testing.T) {
	tests := []struct {
		name  string
		leave bool
	}{
		{"client leaves", true},
		{"client stays", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran, stopped, release := make(chan struct{}), make(chan bool, 1), make(chan struct{})
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				l := AfterLeave(wrapped{w}, func() { close(ran) })
				if l == nil {
					t.Error("AfterLeave: nil for an h1 response behind a wrapper")
					return
				}
				if tt.leave {
					select {
					case <-ran:
					case <-time.After(20 * time.Second):
						t.Error("the hook did not run after the client left")
					}
				} else {
					<-release
				}
				stopped <- l.Stop()
				io.WriteString(w, "done")
			})
			addr := serveH1(t, &Server{Handler: h})
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if tt.leave {
				c.Close()
				if <-stopped {
					t.Error("Stop: true after the hook ran")
				}
				return
			}
			time.AfterFunc(3*leaveCheckAfter, func() { close(release) })
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if !<-stopped {
				t.Error("Stop: false, but the client stayed")
			}
			select {
			case <-ran:
				t.Error("the hook ran, but the client stayed")
			default:
			}
		})
	}
	if AfterLeave(httptestRecorder{}, func() {}) != nil {
		t.Error("AfterLeave: not nil for another ResponseWriter")
	}
}

type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type httptestRecorder struct{ http.ResponseWriter }

func serveH1(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(ln) }()
	t.Cleanup(func() { s.Close(); <-done })
	return ln.Addr().String()
}

// TestLeaveAfterQuickRequests: on a connection whose watch timer was
// armed for an earlier, quick request, a request that waits still sees
// its client leave (the timer, finding a newer request, is armed again).
func TestLeaveAfterQuickRequests(t *testing.T) {
	cancelled := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quick" {
			io.WriteString(w, "ok")
			return
		}
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(20 * time.Second):
		}
	})
	c, err := net.Dial("tcp", serveH1(t, &Server{Handler: h}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for range 3 {
		io.WriteString(c, "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	io.WriteString(c, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting request's context was not cancelled after its client left")
	}
}
