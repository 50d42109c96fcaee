package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/transmirror/transmirror/probe"
)

// DefaultMaxResponse bounds the answer body a Client reads by default.
const DefaultMaxResponse = 8 << 20

// maxMessage bounds the error message a StatusError keeps from a body that
// is not an ErrorReply.
const maxMessage = 512

// ClientOptions configure a Client.
type ClientOptions struct {
	// HTTP sends the requests (default: a client that follows no
	// redirect, since a signature covers one URL). Deadlines come from the
	// context of each call.
	HTTP *http.Client
	// Secret is the group's secret, which signs the writes. Without one a
	// signed call fails with ErrNoSecret before anything is sent.
	Secret []byte
	// Clock gives the time of signatures (default time.Now).
	Clock func() time.Time
	// Rand is where the nonce of each signature comes from (default
	// crypto/rand.Reader): every signed request has one of its own, so
	// that two identical writes in one second are not a replay.
	Rand io.Reader
	// MaxResponse bounds an answer's body (default DefaultMaxResponse); a
	// larger answer is an ErrResponse and an ErrTooLarge.
	MaxResponse int64
}

// Client calls an admin server: dnsd's for groupctl and the mirrors, a
// mirror's for its load report. Each method is one route; a 2xx answer is
// decoded into the route's type, any other status is a *StatusError that
// carries the status and the server's message. A Client is safe for
// concurrent use.
type Client struct {
	base string
	o    ClientOptions
}

// StatusError is an answer with a status other than 2xx.
type StatusError struct {
	// Method and Path are the request's.
	Method, Path string
	// Code is the status code, Status its line ("401 Unauthorized").
	Code   int
	Status string
	// Message is the server's error message: ErrorReply.Error, else the
	// first line of the body.
	Message string
}

// Error returns the request, the status and the server's message.
func (e *StatusError) Error() string {
	s := "api: " + e.Method + " " + e.Path + ": " + e.Status
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap returns ErrStatus.
func (e *StatusError) Unwrap() error { return ErrStatus }

// NewClient returns a Client for the admin server at baseURL, an absolute
// http or https URL (a path in it prefixes every route).
func NewClient(baseURL string, o ClientOptions) (*Client, error) {
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, fmt.Errorf("%w: %q: want http:// or https:// and a host", ErrBadURL, baseURL)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("%w: %q: want no query, fragment or user", ErrBadURL, baseURL)
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.MaxResponse <= 0 {
		o.MaxResponse = DefaultMaxResponse
	}
	return &Client{base: strings.TrimSuffix(baseURL, "/"), o: o}, nil
}

// URL returns the absolute URL of route with its wildcards filled in by
// values (see Route.Path).
func (c *Client) URL(route Route, values ...string) string {
	return c.base + route.Path(values...)
}

// Groups returns the list of groups (ListGroups).
func (c *Client) Groups(ctx context.Context) (GroupList, error) {
	var l GroupList
	err := c.do(ctx, call{route: ListGroups}, &l)
	return l, err
}

// Group returns the view of group (GetGroup, GROUP-QUERY).
func (c *Client) Group(ctx context.Context, group string) (GroupView, error) {
	var v GroupView
	err := c.do(ctx, call{route: GetGroup, values: []string{group}}, &v)
	return v, err
}

// Explain returns why dnsd answers group the way it does for q
// (ExplainGroup).
func (c *Client) Explain(ctx context.Context, group string, q ExplainQuery) (Explanation, error) {
	var e Explanation
	err := c.do(ctx, call{route: ExplainGroup, values: []string{group}, query: q.Values()}, &e)
	return e, err
}

// Where returns which members of group hold the file at the URL path p
// (GroupWhere).
func (c *Client) Where(ctx context.Context, group, p string) (Where, error) {
	var wh Where
	err := c.do(ctx, call{route: GroupWhere, values: []string{group}, query: url.Values{PathParam: {p}}}, &wh)
	return wh, err
}

// AddMember adds info to group (AddMember, GROUP-ADD, signed) and returns
// the member as dnsd added it.
func (c *Client) AddMember(ctx context.Context, group string, info MemberInfo) (MemberInfo, error) {
	body, err := json.Marshal(info)
	if err != nil {
		return MemberInfo{}, fmt.Errorf("%w: %w", ErrRequest, err)
	}
	var out MemberInfo
	err = c.do(ctx, call{route: AddMember, values: []string{group}, body: body, signed: true}, &out)
	return out, err
}

// RemoveMember removes a run-time member (RemoveMember, GROUP-EXIT,
// signed).
func (c *Client) RemoveMember(ctx context.Context, group, member string) (Removed, error) {
	var out Removed
	err := c.do(ctx, call{route: RemoveMember, values: []string{group, member}, signed: true}, &out)
	return out, err
}

// Drain stops dnsd answering with member and keeps probing it
// (DrainMember, signed).
func (c *Client) Drain(ctx context.Context, group, member string) (Drained, error) {
	var out Drained
	err := c.do(ctx, call{route: DrainMember, values: []string{group, member}, signed: true}, &out)
	return out, err
}

// Undrain lets dnsd answer with member again (UndrainMember, signed).
func (c *Client) Undrain(ctx context.Context, group, member string) (Drained, error) {
	var out Drained
	err := c.do(ctx, call{route: UndrainMember, values: []string{group, member}, signed: true}, &out)
	return out, err
}

// PushRedirects sends a dispatcher's redirect rates to dnsd for group
// (PushRedirects, signed).
func (c *Client) PushRedirects(ctx context.Context, group string, r RedirectReport) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRequest, err)
	}
	return c.do(ctx, call{route: PushRedirects, values: []string{group}, body: body, signed: true}, nil)
}

// PushLoad sends r to dnsd as the report of its group and member
// (PushLoad, LOAD-INFORM, signed).
func (c *Client) PushLoad(ctx context.Context, r probe.Report) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRequest, err)
	}
	return c.do(ctx, call{route: PushLoad, values: []string{r.Group, r.Member}, body: body, signed: true}, nil)
}

// Reload asks dnsd to reload its configuration (Reload; loopback callers
// only). A refused configuration is a *StatusError whose Message is why.
func (c *Client) Reload(ctx context.Context) error {
	return c.do(ctx, call{route: Reload}, nil)
}

// call is one request.
type call struct {
	route  Route
	values []string
	query  url.Values
	body   []byte // nil: none
	signed bool
}

// do sends cl and decodes a 2xx answer into out (nil: the body is read
// and dropped).
func (c *Client) do(ctx context.Context, cl call, out any) error {
	method, path := cl.route.Method(), cl.route.Path(cl.values...)
	target := c.base + path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	if cl.signed && len(c.o.Secret) == 0 {
		return fmt.Errorf("%w: %s %s", ErrNoSecret, method, path)
	}
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrRequest, method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set(RequestHeader, "1")
	if cl.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.signed {
		nonce, err := NewNonce(c.o.Rand)
		if err != nil {
			return fmt.Errorf("%w: %s %s: %w", ErrRequest, method, path, err)
		}
		SignRequestNonce(req, c.o.Secret, cl.body, c.o.Clock(), nonce)
	}
	resp, err := c.o.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTransport, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.o.MaxResponse+1))
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrTransport, method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &StatusError{Method: method, Path: path, Code: resp.StatusCode, Status: resp.Status, Message: message(b)}
	}
	if int64(len(b)) > c.o.MaxResponse {
		return fmt.Errorf("%w: %s %s: %w: more than %d bytes", ErrResponse, method, path, ErrTooLarge, c.o.MaxResponse)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrResponse, method, path, err)
	}
	return nil
}

// message returns the server's error message from an error answer's body:
// the ErrorReply's, else the body's first line, at most maxMessage bytes.
func message(b []byte) string {
	var e ErrorReply
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > maxMessage {
		s = s[:maxMessage]
	}
	return strings.ToValidUTF8(strings.TrimSpace(s), "?")
}
