package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestProbeLoad(t *testing.T) {
	unblock := make(chan struct{})
	defer close(unblock)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(goodJSON)) })
	mux.HandleFunc("/500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "oops", 500) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/badjson", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"group":`)) })
	mux.HandleFunc("/invalid", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Replace(goodJSON, `"load":1017.5`, `"load":1`, 1)))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.Repeat(" ", MaxReportSize+1))) })
	mux.HandleFunc("/bigchunked", func(w http.ResponseWriter, r *http.Request) {
		for range 20 {
			w.Write([]byte(strings.Repeat(" ", 1024)))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select { // until the client gives up
		case <-r.Context().Done():
		case <-unblock:
		}
	})
	mux.HandleFunc("/slowbody", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"group":"www",`))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-unblock:
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// A port with nothing listening: bind, read the port, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/v1/load"
	ln.Close()

	client := NewClient(ClientOptions{})
	tests := []struct {
		name    string
		target  string
		timeout time.Duration
		reason  Reason
		status  int
		errIs   error
	}{
		{"ok", srv.URL + "/ok", time.Second, ReasonNone, 200, nil},
		{"500", srv.URL + "/500", time.Second, ReasonStatus, 500, ErrProbe},
		{"redirect not followed", srv.URL + "/redirect", time.Second, ReasonStatus, 302, ErrProbe},
		{"bad json", srv.URL + "/badjson", time.Second, ReasonDecode, 200, ErrReportSyntax},
		{"invalid report", srv.URL + "/invalid", time.Second, ReasonValidate, 200, ErrInvalidReport},
		{"oversized body", srv.URL + "/big", time.Second, ReasonBody, 200, ErrReportTooLarge},
		{"oversized chunked body", srv.URL + "/bigchunked", time.Second, ReasonBody, 200, ErrReportTooLarge},
		{"slow past deadline", srv.URL + "/slow", 50 * time.Millisecond, ReasonResponse, 0, context.DeadlineExceeded},
		{"slow body past deadline", srv.URL + "/slowbody", 50 * time.Millisecond, ReasonBody, 200, context.DeadlineExceeded},
		{"connection refused", closed, time.Second, ReasonConnect, 0, ErrProbe},
		{"bad scheme", "ftp://127.0.0.1/x", time.Second, ReasonRequest, 0, ErrProbe},
		{"bad url", "http://[::1", time.Second, ReasonRequest, 0, ErrProbe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			res := ProbeLoad(ctx, client, tt.target, nil)
			if res.Reason != tt.reason || res.Status != tt.status || res.Success != (tt.reason == ReasonNone) {
				t.Fatalf("got success=%v reason=%q status=%d err=%v; want reason %q status %d",
					res.Success, res.Reason, res.Status, res.Err, tt.reason, tt.status)
			}
			if tt.errIs != nil && !errors.Is(res.Err, tt.errIs) {
				t.Errorf("err = %v, want %v", res.Err, tt.errIs)
			}
			if tt.errIs != nil && !errors.Is(res.Err, ErrProbe) {
				t.Errorf("err = %v, want it to wrap ErrProbe", res.Err)
			}
			if res.Phases.Total <= 0 {
				t.Errorf("total duration %s", res.Phases.Total)
			}
			if res.Success {
				if !reflect.DeepEqual(res.Report, goodReport()) {
					t.Errorf("report %+v", res.Report)
				}
				if res.Phases.FirstByte <= 0 || res.Phases.FirstByte > res.Phases.Total {
					t.Errorf("phases %+v", res.Phases)
				}
			}
		})
	}

	t.Run("dns", func(t *testing.T) {
		// A resolver that never leaves the process.
		noDNS := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no resolver in tests")
		}}
		c := NewClient(ClientOptions{})
		c.Transport.(*http.Transport).DialContext = (&net.Dialer{Resolver: noDNS}).DialContext
		res := ProbeLoad(context.Background(), c, "http://mirror.example.test/v1/load", nil)
		if res.Reason != ReasonDNS {
			t.Fatalf("reason %q err %v, want dns", res.Reason, res.Err)
		}
	})

	t.Run("keep-alive reuses the connection", func(t *testing.T) {
		for i := range 3 {
			res := ProbeLoad(context.Background(), client, srv.URL+"/ok", nil)
			if !res.Success {
				t.Fatal(res.Err)
			}
			if i > 0 && (!res.ConnReused || res.Phases.Connect != 0) {
				t.Errorf("probe %d: reused=%v connect=%s", i, res.ConnReused, res.Phases.Connect)
			}
		}
	})
}
