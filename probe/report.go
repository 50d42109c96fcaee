package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// MaxReportSize is the largest report body, in bytes, that ProbeLoad reads
// and that a push intake should accept. A real report is about 300 bytes.
const MaxReportSize = 16 << 10

// maxNameLen bounds group and member names in a report.
const maxNameLen = 253

// What a Watcher believes of a report beyond Validate (see CheckTime and
// CheckLoad).
const (
	// DefaultReportMaxSkew is how far ahead of dnsd's clock a report's
	// time may be by default: the default signature window, so that a
	// report is not believed further ahead than its signature.
	DefaultReportMaxSkew = 30 * time.Second
	// DefaultReportMaxAge is how old a report may be by default: the
	// default signature window twice, room for a report signed a while
	// after it was taken (a push that waited out its timeout), and no
	// more: older figures say little of the member now.
	DefaultReportMaxAge = 60 * time.Second
	// MaxLoadRatio is the most a report's load (and serving load) may be,
	// as a multiple of the member's capacity.
	MaxLoadRatio = 1000
)

// Report is one member's load report, the same JSON object for pull
// (GET /v1/load on the mirror) and push (POST to dnsd). Every field but
// bandwidth is required when decoding; the JSON names are:
//
//	group                 group name
//	member                member name, unique in the group
//	seq                   sequence number, increasing with every report of one Reporter
//	time                  when the figures were taken, RFC 3339 with nanoseconds
//	r                     requests per second
//	m                     run-queue length (1-minute load average)
//	conns                 requests in flight
//	bytes_per_second      response bytes written per second
//	redirects_per_second  302 responses per second
//	load                  10·(r + m), the server-group load figure
//	capacity              the member's configured capacity, in load units
//	bandwidth             the member's configured bandwidth, in bytes per second;
//	                      optional, absent (older mirrors) or 0: no limit
//	group_requests_per_second
//	                      requests per second that came in on the group name,
//	                      what DNS answers sent (not redirects from siblings);
//	                      optional, absent (older mirrors, a dispatcher) or 0
//	window_seconds        the width of the window r and the other rates are
//	                      taken over; optional, absent: the default 10 s
//	serving_load          the load of what the member serves now (not what it
//	                      redirects), 10·(s + m) with s an exponentially
//	                      weighted rate of served requests (time constant about
//	                      1 s): the fast figure of the 302 correction; optional,
//	                      absent or 0: take load − 10·redirects_per_second
//	generation            when the member's last complete sync was taken from
//	                      its master (its trace file), RFC 3339; optional,
//	                      absent: the member does not say (an older mirror,
//	                      no trace configured or readable)
//	top                   the member's most requested paths, at most
//	                      MaxTopPaths objects {"path": P, "count": C}, most
//	                      requested first: P the path in canonical escaped
//	                      form (see CheckTopPath), C its requests, decayed
//	                      (mirror/popular: halved every 5 minutes); optional,
//	                      absent: none counted (an older mirror, a dispatcher)
//	rescued               requests the member redirected to a sibling that
//	                      holds the file instead of answering 404, since the
//	                      mirror started; optional, absent: 0 or an older mirror
type Report struct {
	// Group is the group the member belongs to.
	Group string `json:"group"`
	// Member is the member's name, unique in its group.
	Member string `json:"member"`
	// Seq increases with every report a Reporter makes; it restarts with
	// the process, so order reports by Time.
	Seq uint64 `json:"seq"`
	// Time is when the figures were taken.
	Time time.Time `json:"time"`
	// R is requests per second.
	R float64 `json:"r"`
	// M is the run-queue length.
	M float64 `json:"m"`
	// Conns is the number of requests in flight.
	Conns int64 `json:"conns"`
	// BytesPerSecond is response bytes written per second.
	BytesPerSecond float64 `json:"bytes_per_second"`
	// RedirectsPerSecond is 302 responses per second.
	RedirectsPerSecond float64 `json:"redirects_per_second"`
	// Load is 10·(R + M).
	Load float64 `json:"load"`
	// Capacity is the member's configured capacity, in load units.
	Capacity float64 `json:"capacity"`
	// Bandwidth is the member's configured bandwidth (its uplink), in
	// bytes per second; 0 is no limit. It is left out of the JSON when 0,
	// so that a mirror without one sends what dnsd always took.
	Bandwidth float64 `json:"bandwidth,omitempty"`
	// GroupRequestsPerSecond is the requests per second that came in on
	// the group name (sent by DNS answers, not redirected by a sibling),
	// over the window; 0 is left out (an older mirror, a dispatcher).
	GroupRequestsPerSecond float64 `json:"group_requests_per_second,omitempty"`
	// Window is the width of the window that the rates are taken over, in
	// seconds; 0 is left out (an older mirror: DefaultReportWindow).
	Window float64 `json:"window_seconds,omitempty"`
	// ServingLoad is the load of what the member serves now, in load
	// units: 10·(s + m), s an exponentially weighted rate of the requests
	// it served rather than redirected (time constant about a second).
	// 0 is left out: a reader then takes Load − 10·RedirectsPerSecond.
	ServingLoad float64 `json:"serving_load,omitempty"`
	// Generation is when the member's last complete sync was taken from
	// its master, as its trace file says (ParseTrace); zero is left out:
	// the member does not say.
	Generation time.Time `json:"generation,omitzero"`
	// Top are the member's most requested paths, most requested first (at
	// most MaxTopPaths); empty is left out.
	Top []PathCount `json:"top,omitempty"`
	// Rescued is the number of requests the member redirected to a sibling
	// holding the file (or a newer copy) instead of answering 404, since
	// it started: a count, not a rate, so that it is exact, a lost push
	// loses nothing of it, and a reader takes the rate it wants from two
	// reports; 0 is left out.
	Rescued uint64 `json:"rescued,omitempty"`
	// Schemes are the URL schemes its public listeners serve the group
	// name on ("http", "https": SchemeHTTP, SchemeHTTPS), each at most
	// once; empty is left out: an older mirror, taken to serve http only,
	// so that a request that came over https is never redirected to it.
	Schemes []string `json:"schemes,omitempty"`
	// CertNotAfter is when the first of the certificates its HTTPS
	// listeners serve expires; zero is left out (no HTTPS, or an older
	// mirror).
	CertNotAfter time.Time `json:"cert_not_after,omitzero"`
}

// The schemes of Report.Schemes.
const (
	SchemeHTTP  = "http"
	SchemeHTTPS = "https"
)

// Serves reports whether the member serves scheme: a report without
// schemes serves http only.
func (r Report) Serves(scheme string) bool {
	if len(r.Schemes) == 0 {
		return scheme == SchemeHTTP
	}
	return slices.Contains(r.Schemes, scheme)
}

// Served returns the load of what the member serves: ServingLoad when
// the report has it, else Load − 10·RedirectsPerSecond (at least 0).
func (r Report) Served() float64 {
	if r.ServingLoad > 0 {
		return r.ServingLoad
	}
	return max(r.Load-LoadOf(r.RedirectsPerSecond, 0), 0)
}

// WindowOrDefault returns the report's window, DefaultReportWindow when
// it has none.
func (r Report) WindowOrDefault() time.Duration {
	if r.Window > 0 && r.Window < 1e6 {
		return time.Duration(r.Window * float64(time.Second))
	}
	return DefaultReportWindow
}

// reportFields are the JSON names of Report's fields; DecodeReport takes
// each at most once and requires each one that is not optional.
var reportFields = [...]struct {
	name     string
	optional bool // absent in the reports of older mirrors
}{
	{"group", false}, {"member", false}, {"seq", false}, {"time", false},
	{"r", false}, {"m", false}, {"conns", false},
	{"bytes_per_second", false}, {"redirects_per_second", false},
	{"load", false}, {"capacity", false}, {"bandwidth", true},
	{"group_requests_per_second", true}, {"window_seconds", true}, {"serving_load", true},
	{"generation", true}, {"top", true}, {"rescued", true}, {"schemes", true}, {"cert_not_after", true},
}

// LoadOf returns the server-group load figure 10·(r + m).
func LoadOf(r, m float64) float64 { return 10 * (r + m) }

// loadTolerance is how far a report's load may be from 10·(r + m): 0.1 (a
// producer that rounds r and m to two decimals) or one part in a million,
// whichever is larger.
func loadTolerance(want float64) float64 { return math.Max(0.1, 1e-6*math.Abs(want)) }

// Validate reports whether r is a well-formed report: group and member
// non-empty (at most 253 bytes, no control characters), time set, every
// number finite and non-negative, Load equal to 10·(R + M) within
// rounding (0.1 or one part in a million, whichever is larger), and Top
// at most MaxTopPaths distinct paths that pass CheckTopPath with finite
// non-negative counts.
func (r Report) Validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{{"group", r.Group}, {"member", r.Member}} {
		if err := checkName(f.v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
		}
	}
	if r.Time.IsZero() {
		errs = append(errs, errors.New("time: missing"))
	}
	if y := r.Generation.Year(); !r.Generation.IsZero() && (y < 1970 || y > 9999) {
		errs = append(errs, fmt.Errorf("generation: year %d out of range", y))
	}
	if y := r.CertNotAfter.Year(); !r.CertNotAfter.IsZero() && (y < 1970 || y > 9999) {
		errs = append(errs, fmt.Errorf("cert_not_after: year %d out of range", y))
	}
	if r.Conns < 0 {
		errs = append(errs, fmt.Errorf("conns: %d is negative", r.Conns))
	}
	nums := []struct {
		name string
		v    float64
	}{
		{"r", r.R}, {"m", r.M}, {"bytes_per_second", r.BytesPerSecond},
		{"redirects_per_second", r.RedirectsPerSecond}, {"load", r.Load}, {"capacity", r.Capacity},
		{"bandwidth", r.Bandwidth}, {"group_requests_per_second", r.GroupRequestsPerSecond},
		{"window_seconds", r.Window}, {"serving_load", r.ServingLoad},
	}
	if err := checkTop(r.Top); err != nil {
		errs = append(errs, fmt.Errorf("top: %w", err))
	}
	if err := checkSchemes(r.Schemes); err != nil {
		errs = append(errs, fmt.Errorf("schemes: %w", err))
	}
	finite := true
	for _, n := range nums {
		switch {
		case math.IsNaN(n.v) || math.IsInf(n.v, 0):
			errs = append(errs, fmt.Errorf("%s: not finite", n.name))
			finite = false
		case n.v < 0:
			errs = append(errs, fmt.Errorf("%s: %g is negative", n.name, n.v))
		}
	}
	if finite {
		if want := LoadOf(r.R, r.M); math.Abs(r.Load-want) > loadTolerance(want) {
			errs = append(errs, fmt.Errorf("load: %g is not 10·(r + m) = %g", r.Load, want))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidReport, errors.Join(errs...))
}

// CheckTime reports whether r's time is believable at now: at most maxSkew
// ahead of now (else ErrReportFuture) and at most maxAge behind (else
// ErrReportStale). The error names the field: "time: 2h0m0s ahead of
// dnsd's clock (at most 30s)".
func (r Report) CheckTime(now time.Time, maxSkew, maxAge time.Duration) error {
	switch d := r.Time.Sub(now); {
	case d > maxSkew:
		return fmt.Errorf("%w: time: %s ahead of dnsd's clock (at most %s)", ErrReportFuture, roundDuration(d), maxSkew)
	case -d > maxAge:
		return fmt.Errorf("%w: time: %s behind dnsd's clock (at most %s)", ErrReportStale, roundDuration(-d), maxAge)
	}
	return nil
}

// CheckLoad reports whether r's load and serving load are believable for a
// member of this capacity: at most MaxLoadRatio × capacity (else
// ErrAbsurdLoad, naming the field). A capacity that is not positive bounds
// nothing: the figures are then only finite and non-negative (Validate).
func (r Report) CheckLoad(capacity float64) error {
	if !(capacity > 0) {
		return nil
	}
	limit := MaxLoadRatio * capacity
	for _, f := range []struct {
		name string
		v    float64
	}{{"load", r.Load}, {"serving_load", r.ServingLoad}} {
		if f.v > limit {
			return fmt.Errorf("%w: %s: %g is more than %d× the capacity %g", ErrAbsurdLoad, f.name, f.v, MaxLoadRatio, capacity)
		}
	}
	return nil
}

// roundDuration rounds d for a message: to the second from a minute on,
// else to the millisecond.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func checkName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("longer than %d bytes", maxNameLen)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return errors.New("contains a control character")
		}
	}
	return nil
}

// DecodeReport reads one report from rd, at most limit bytes
// (MaxReportSize when limit <= 0), and validates it. It is strict: the body must be exactly
// one JSON object holding every field of Report exactly once (the optional ones at
// most once: a report without it has no bandwidth limit), under its exact
// name, with a scalar non-null value (top: an array of objects holding
// "path" and "count" exactly once each), followed by nothing but white
// space.
func DecodeReport(rd io.Reader, limit int64) (Report, error) {
	if limit <= 0 {
		limit = MaxReportSize
	}
	b, err := io.ReadAll(io.LimitReader(rd, limit+1))
	if err != nil {
		return Report{}, fmt.Errorf("probe: reading report: %w", err)
	}
	if int64(len(b)) > limit {
		return Report{}, fmt.Errorf("%w: more than %d bytes", ErrReportTooLarge, limit)
	}
	if err := checkReportShape(b); err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrReportSyntax, err)
	}
	var r Report
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrReportSyntax, err)
	}
	if err := r.Validate(); err != nil {
		return Report{}, err
	}
	if len(r.Top) == 0 {
		r.Top = nil // "top": [] is no top, as a report without it
	}
	if len(r.Schemes) == 0 {
		r.Schemes = nil
	}
	return r, nil
}

// checkReportShape walks the tokens of b: one object, every key one of
// reportFields spelled exactly (encoding/json would match any case), each
// once (the optional ones at most once), with a scalar non-null value, and
// nothing after the object.
func checkReportShape(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("not a JSON object")
	}
	var seen [len(reportFields)]bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		i := fieldIndex(key)
		if i < 0 {
			return fmt.Errorf("unknown field %q", key)
		}
		if seen[i] {
			return fmt.Errorf("duplicate field %q", key)
		}
		seen[i] = true
		switch reportFields[i].name {
		case "top":
			if err := checkTopShape(dec); err != nil {
				return fmt.Errorf("field %q: %w", key, err)
			}
			continue
		case "schemes":
			if err := checkStringsShape(dec, 2); err != nil {
				return fmt.Errorf("field %q: %w", key, err)
			}
			continue
		}
		v, err := dec.Token()
		if err != nil {
			return err
		}
		switch v.(type) {
		case json.Delim:
			return fmt.Errorf("field %q: not a scalar", key)
		case nil:
			return fmt.Errorf("field %q: null", key)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return err
	}
	for i, ok := range seen {
		if f := reportFields[i]; !ok && !f.optional {
			return fmt.Errorf("missing field %q", f.name)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the object")
	}
	return nil
}

func fieldIndex(key string) int {
	for i, f := range reportFields {
		if f.name == key {
			return i
		}
	}
	return -1
}

// SameGroup reports whether a and b name the same group: domain names
// compare without case and with or without the trailing dot
// ("www.example.org" is "WWW.example.org.").
func SameGroup(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

// checkSchemes reports whether schemes are known ones, each at most once.
func checkSchemes(schemes []string) error {
	for i, sc := range schemes {
		if sc != SchemeHTTP && sc != SchemeHTTPS {
			return fmt.Errorf("%q: want %s or %s", sc, SchemeHTTP, SchemeHTTPS)
		}
		if slices.Contains(schemes[:i], sc) {
			return fmt.Errorf("%q twice", sc)
		}
	}
	return nil
}

// checkStringsShape reads an array of at most max strings from dec.
func checkStringsShape(dec *json.Decoder, max int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return errors.New("not an array")
	}
	for n := 0; dec.More(); n++ {
		if n == max {
			return fmt.Errorf("more than %d items", max)
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if _, ok := tok.(string); !ok {
			return errors.New("an item is not a string")
		}
	}
	_, err = dec.Token() // the closing ']'
	return err
}
