package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
)

const testSecret = "group secret"

// fakeDNSD is the part of dnsd's admin API the client tests need: the
// routes of this package, writes verified with testSecret, and a few
// answers that go wrong on purpose.
type fakeDNSD struct {
	srv      *httptest.Server
	verifier *Verifier
	requests atomic.Int64
	pushed   atomic.Pointer[probe.Report]
}

func newFakeDNSD(t *testing.T) *fakeDNSD {
	t.Helper()
	f := &fakeDNSD{verifier: NewVerifier(0, 0)}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	signed := func(h func(w http.ResponseWriter, r *http.Request, body []byte)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := f.verifier.VerifyRequest(r, body, []byte(testSecret), time.Now()); err != nil {
				reply(w, http.StatusUnauthorized, ErrorReply{Error: err.Error()})
				return
			}
			h(w, r, body)
		}
	}
	mux.HandleFunc(ListGroups.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, GroupList{Groups: []GroupSummary{{Name: "www.example.org.", Policy: "geo", Members: 2, Up: 1}}})
	})
	mux.HandleFunc(GetGroup.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		switch g := r.PathValue(GroupParam); g {
		case "broken":
			reply(w, http.StatusInternalServerError, ErrorReply{Error: "dnsd: no configuration loaded"})
		case "plain":
			http.Error(w, "upstream says no\nsecond line", http.StatusBadGateway)
		case "html":
			_, _ = io.WriteString(w, "<html>")
		case "huge":
			_, _ = io.WriteString(w, `{"name":"`+strings.Repeat("x", 2048)+`"}`)
		case "moved":
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusFound)
		case "www.example.org.", "a/b":
			reply(w, http.StatusOK, GroupView{Name: g, Policy: "geo", Members: []MemberView{{MemberInfo: MemberInfo{Name: "fra1", Capacity: 100}, Load: 40, Pending: 10}}})
		default:
			reply(w, http.StatusNotFound, ErrorReply{Error: "dnsd: unknown group: " + g})
		}
	})
	mux.HandleFunc(ExplainGroup.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		reply(w, http.StatusOK, Explanation{Group: r.PathValue(GroupParam), Client: q.Get(ClientParam), ECS: q.Get(ECSParam), Qtype: q.Get(QtypeParam)})
	})
	mux.HandleFunc(AddMember.Pattern(), signed(func(w http.ResponseWriter, r *http.Request, body []byte) {
		var info MemberInfo
		if err := json.Unmarshal(body, &info); err != nil {
			reply(w, http.StatusBadRequest, ErrorReply{Error: err.Error()})
			return
		}
		reply(w, http.StatusCreated, info)
	}))
	mux.HandleFunc(RemoveMember.Pattern(), signed(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		reply(w, http.StatusOK, Removed{Removed: r.PathValue(MemberParam)})
	}))
	for _, rt := range []Route{DrainMember, UndrainMember} {
		mux.HandleFunc(rt.Pattern(), signed(func(w http.ResponseWriter, r *http.Request, _ []byte) {
			reply(w, http.StatusOK, Drained{Member: r.PathValue(MemberParam), Drained: rt == DrainMember})
		}))
	}
	mux.HandleFunc(PushLoad.Pattern(), signed(func(w http.ResponseWriter, r *http.Request, body []byte) {
		rep, err := probe.DecodeReport(strings.NewReader(string(body)), 0)
		if err != nil {
			reply(w, http.StatusBadRequest, ErrorReply{Error: err.Error()})
			return
		}
		f.pushed.Store(&rep)
		w.WriteHeader(http.StatusAccepted) // no body, as a minimal dnsd may answer
	}))
	mux.HandleFunc(Reload.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusBadRequest, ErrorReply{Error: `zones: dnsd.yaml:3:1: unknown key "zonez"`})
	})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.requests.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func newTestClient(t *testing.T, base, secret string) *Client {
	t.Helper()
	o := ClientOptions{MaxResponse: 1024}
	if secret != "" {
		o.Secret = []byte(secret)
	}
	c, err := NewClient(base, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func report(now time.Time) probe.Report {
	return probe.Report{Group: "www.example.org.", Member: "fra1", Seq: 1, Time: now, R: 1, M: 0.5, Load: 15, Capacity: 100}
}

func TestClient(t *testing.T) {
	f := newFakeDNSD(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		secret string
		call   func(c *Client) (any, error)
		want   any   // the decoded answer, when err is nil
		err    error // wrapped by the error
		code   int   // the status of a *StatusError
		msg    string
	}{
		{"list", "", func(c *Client) (any, error) { return c.Groups(ctx) },
			GroupList{Groups: []GroupSummary{{Name: "www.example.org.", Policy: "geo", Members: 2, Up: 1}}}, nil, 0, ""},
		{"view", "", func(c *Client) (any, error) { return c.Group(ctx, "www.example.org.") },
			GroupView{Name: "www.example.org.", Policy: "geo", Members: []MemberView{{MemberInfo: MemberInfo{Name: "fra1", Capacity: 100}, Load: 40, Pending: 10}}}, nil, 0, ""},
		{"view of an escaped name", "", func(c *Client) (any, error) {
			v, err := c.Group(ctx, "a/b")
			return v.Name, err
		}, "a/b", nil, 0, ""},
		{"explain sends the query", "", func(c *Client) (any, error) {
			return c.Explain(ctx, "www", ExplainQuery{Client: "192.0.2.1", ECS: "198.51.100.0/24", Qtype: "AAAA"})
		}, Explanation{Group: "www", Client: "192.0.2.1", ECS: "198.51.100.0/24", Qtype: "AAAA"}, nil, 0, ""},
		{"add, signed", testSecret, func(c *Client) (any, error) {
			return c.AddMember(ctx, "www", MemberInfo{Name: "ams1", Host: "ams1.example.org.", Addresses: []string{"192.0.2.2"}, Capacity: 50})
		}, MemberInfo{Name: "ams1", Host: "ams1.example.org.", Addresses: []string{"192.0.2.2"}, Capacity: 50}, nil, 0, ""},
		{"remove, signed", testSecret, func(c *Client) (any, error) { return c.RemoveMember(ctx, "www", "ams1") },
			Removed{Removed: "ams1"}, nil, 0, ""},
		{"drain", testSecret, func(c *Client) (any, error) { return c.Drain(ctx, "www", "fra1") },
			Drained{Drained: true, Member: "fra1"}, nil, 0, ""},
		{"undrain", testSecret, func(c *Client) (any, error) { return c.Undrain(ctx, "www", "fra1") },
			Drained{Drained: false, Member: "fra1"}, nil, 0, ""},
		{"push with an empty 202", testSecret, func(c *Client) (any, error) { return nil, c.PushLoad(ctx, report(time.Now())) },
			nil, nil, 0, ""},
		{"wrong secret: 401 with the server's reason", "not the secret", func(c *Client) (any, error) { return c.RemoveMember(ctx, "www", "ams1") },
			nil, ErrStatus, http.StatusUnauthorized, "api: signature mismatch"},
		{"push with a wrong secret", "not the secret", func(c *Client) (any, error) { return nil, c.PushLoad(ctx, report(time.Now())) },
			nil, ErrStatus, http.StatusUnauthorized, "api: signature mismatch"},
		{"not found", "", func(c *Client) (any, error) { return c.Group(ctx, "ftp") },
			nil, ErrStatus, http.StatusNotFound, "dnsd: unknown group: ftp"},
		{"server error with its message", "", func(c *Client) (any, error) { return c.Group(ctx, "broken") },
			nil, ErrStatus, http.StatusInternalServerError, "dnsd: no configuration loaded"},
		{"error that is not JSON: its first line", "", func(c *Client) (any, error) { return c.Group(ctx, "plain") },
			nil, ErrStatus, http.StatusBadGateway, "upstream says no"},
		{"refused reload with the reason", "", func(c *Client) (any, error) { return nil, c.Reload(ctx) },
			nil, ErrStatus, http.StatusBadRequest, `zones: dnsd.yaml:3:1: unknown key "zonez"`},
		{"redirect not followed", "", func(c *Client) (any, error) { return c.Group(ctx, "moved") },
			nil, ErrStatus, http.StatusFound, ""},
		{"not JSON", "", func(c *Client) (any, error) { return c.Group(ctx, "html") },
			nil, ErrResponse, 0, ""},
		{"too large", "", func(c *Client) (any, error) { return c.Group(ctx, "huge") },
			nil, ErrTooLarge, 0, ""},
		{"a member that does not marshal: nothing sent", testSecret, func(c *Client) (any, error) {
			return c.AddMember(ctx, "www", MemberInfo{Name: "nan", Capacity: math.NaN()})
		}, nil, ErrRequest, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.call(newTestClient(t, f.srv.URL+"/", tt.secret))
			if tt.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if tt.want != nil && !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got %+v, want %+v", got, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if tt.code == 0 {
				return
			}
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err %v is no *StatusError", err)
			}
			if se.Code != tt.code || se.Message != tt.msg {
				t.Errorf("status %d, message %q; want %d, %q", se.Code, se.Message, tt.code, tt.msg)
			}
			if !strings.Contains(err.Error(), se.Status) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not show the status and the message", err)
			}
		})
	}
	t.Run("the pushed report arrives", func(t *testing.T) {
		now := time.Now().Truncate(time.Second)
		if err := newTestClient(t, f.srv.URL, testSecret).PushLoad(ctx, report(now)); err != nil {
			t.Fatal(err)
		}
		if got := f.pushed.Load(); got == nil || !got.Time.Equal(now) || got.Member != "fra1" {
			t.Errorf("pushed %+v", got)
		}
	})
}

func TestClientSendsNothingWithoutSecret(t *testing.T) {
	f := newFakeDNSD(t)
	c := newTestClient(t, f.srv.URL, "")
	calls := []struct {
		name string
		call func() error
	}{
		{"add", func() error { _, err := c.AddMember(context.Background(), "www", MemberInfo{Name: "x"}); return err }},
		{"remove", func() error { _, err := c.RemoveMember(context.Background(), "www", "x"); return err }},
		{"drain", func() error { _, err := c.Drain(context.Background(), "www", "x"); return err }},
		{"push", func() error { return c.PushLoad(context.Background(), report(time.Now())) }},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			before := f.requests.Load()
			if err := tc.call(); !errors.Is(err, ErrNoSecret) {
				t.Fatalf("err = %v, want ErrNoSecret", err)
			}
			if n := f.requests.Load() - before; n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}

func TestClientTransportError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := newTestClient(t, "http://"+addr, "")
	if _, err := c.Groups(context.Background()); !errors.Is(err, ErrTransport) {
		t.Fatalf("err = %v, want ErrTransport", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Groups(ctx); !errors.Is(err, ErrTransport) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrTransport and context.Canceled", err)
	}
}

func TestNewClient(t *testing.T) {
	tests := []struct {
		name, base string
		ok         bool
		url        string
	}{
		{"http", "http://127.0.0.1:8053", true, "http://127.0.0.1:8053/v1/groups/www"},
		{"trailing slash", "https://dnsd.example.org/", true, "https://dnsd.example.org/v1/groups/www"},
		{"path prefix", "https://admin.example.org/dnsd", true, "https://admin.example.org/dnsd/v1/groups/www"},
		{"no scheme", "127.0.0.1:8053", false, ""},
		{"ftp", "ftp://example.org", false, ""},
		{"no host", "http://", false, ""},
		{"query", "http://example.org/?a=1", false, ""},
		{"user", "http://u:p@example.org", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(tt.base, ClientOptions{})
			if !tt.ok {
				if !errors.Is(err, ErrBadURL) {
					t.Fatalf("err = %v, want ErrBadURL", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.URL(GetGroup, "www"); got != tt.url {
				t.Errorf("URL = %q, want %q", got, tt.url)
			}
		})
	}
}

// TestClientRepeatsInOneSecond: drain, undrain, drain at one instant are
// three writes (each signature has its nonce), not one and two replays;
// the nonces come from ClientOptions.Rand, and a source that fails stops
// the call before anything is sent.
func TestClientRepeatsInOneSecond(t *testing.T) {
	f := newFakeDNSD(t)
	now := time.Now()
	c, err := NewClient(f.srv.URL, ClientOptions{Secret: []byte(testSecret), Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	steps := []struct {
		name string
		call func() (Drained, error)
		want bool
	}{
		{"drain", func() (Drained, error) { return c.Drain(ctx, "www", "fra1") }, true},
		{"undrain", func() (Drained, error) { return c.Undrain(ctx, "www", "fra1") }, false},
		{"drain again", func() (Drained, error) { return c.Drain(ctx, "www", "fra1") }, true},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			d, err := s.call()
			if err != nil || d.Drained != s.want {
				t.Fatalf("%+v, %v; want drained %v", d, err, s.want)
			}
		})
	}
	t.Run("failing nonce source", func(t *testing.T) {
		bad, err := NewClient(f.srv.URL, ClientOptions{Secret: []byte(testSecret), Rand: strings.NewReader("short")})
		if err != nil {
			t.Fatal(err)
		}
		before := f.requests.Load()
		if _, err := bad.Drain(ctx, "www", "fra1"); !errors.Is(err, ErrRequest) {
			t.Errorf("Drain = %v, want ErrRequest", err)
		}
		if f.requests.Load() != before {
			t.Error("a request was sent without a nonce")
		}
	})
}
