package probe

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeReportTop checks the optional top and rescued fields: a report
// without them (an older mirror) decodes with none, one with them
// round-trips, and a malformed one is refused with the reason.
func TestDecodeReportTop(t *testing.T) {
	with := func(extra string) string { return strings.TrimSuffix(goodJSON, "}") + "," + extra + "}" }
	long := "/" + strings.Repeat("a", MaxTopPathLen-1)
	many := make([]string, MaxTopPaths+1)
	for i := range many {
		many[i] = `{"path":"/` + string(rune('a'+i)) + `","count":1}`
	}
	tests := []struct {
		name    string
		body    string
		top     []PathCount
		rescued uint64
		err     string
	}{
		{name: "absent", body: goodJSON},
		{name: "present", body: with(`"top":[{"path":"/a","count":3},{"count":1.5,"path":"/b%20c"}],"rescued":7`),
			top: []PathCount{{"/a", 3}, {"/b%20c", 1.5}}, rescued: 7},
		{name: "empty top", body: with(`"top":[]`)},
		{name: "longest path", body: with(`"top":[{"path":"` + long + `","count":1}]`), top: []PathCount{{long, 1}}},
		{name: "sixteen paths", body: with(`"top":[` + strings.Join(many[:MaxTopPaths], ",") + `]`), top: manyTop(MaxTopPaths)},
		{name: "seventeen paths", body: with(`"top":[` + strings.Join(many, ",") + `]`), err: "17 paths, want at most 16"},
		{name: "path too long", body: with(`"top":[{"path":"` + long + `a","count":1}]`), err: "longer than 512 bytes"},
		{name: "control character", body: with(`"top":[{"path":"/a\u0007","count":1}]`), err: "want escaped printable ASCII"},
		{name: "unescaped space", body: with(`"top":[{"path":"/a b","count":1}]`), err: "want escaped printable ASCII"},
		{name: "html character", body: with(`"top":[{"path":"/a<b","count":1}]`), err: "want escaped printable ASCII"},
		{name: "not a path", body: with(`"top":[{"path":"a","count":1}]`), err: "starting with /"},
		{name: "duplicate path", body: with(`"top":[{"path":"/a","count":1},{"path":"/a","count":2}]`), err: "twice"},
		{name: "negative count", body: with(`"top":[{"path":"/a","count":-1}]`), err: "count -1"},
		{name: "huge count", body: with(`"top":[{"path":"/a","count":1e300}]`), err: "count 1e+300"},
		{name: "null top", body: with(`"top":null`), err: "not an array"},
		{name: "top not an array", body: with(`"top":{"path":"/a"}`), err: `field "top"`},
		{name: "null entry", body: with(`"top":[null]`), err: "not an object"},
		{name: "unknown entry field", body: with(`"top":[{"path":"/a","count":1,"x":1}]`), err: `unknown field "x"`},
		{name: "case folded entry field", body: with(`"top":[{"Path":"/a","count":1}]`), err: `unknown field "Path"`},
		{name: "duplicate entry field", body: with(`"top":[{"path":"/a","path":"/b","count":1}]`), err: `duplicate field "path"`},
		{name: "missing count", body: with(`"top":[{"path":"/a"}]`), err: `want the fields`},
		{name: "nested count", body: with(`"top":[{"path":"/a","count":[1]}]`), err: "not a scalar"},
		{name: "null path", body: with(`"top":[{"path":null,"count":1}]`), err: "not a scalar"},
		{name: "top twice", body: with(`"top":[],"top":[]`), err: `duplicate field "top"`},
		{name: "negative rescued", body: with(`"rescued":-1`), err: "uint64"},
		{name: "rescued as text", body: with(`"rescued":"7"`), err: "string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeReport(strings.NewReader(tc.body), 0)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("DecodeReport = %v; want error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeReport: %v", err)
			}
			if !reflect.DeepEqual(r.Top, tc.top) || r.Rescued != tc.rescued {
				t.Fatalf("top %v rescued %d; want %v %d", r.Top, r.Rescued, tc.top, tc.rescued)
			}
			b, _ := json.Marshal(r)
			if got := strings.Contains(string(b), `"top"`); got != (len(tc.top) > 0) {
				t.Errorf("marshal %s: top present %v", b, got)
			}
		})
	}
}

func manyTop(n int) []PathCount {
	out := make([]PathCount, n)
	for i := range out {
		out[i] = PathCount{Path: "/" + string(rune('a'+i)), Count: 1}
	}
	return out
}

// TestLargestReportFits encodes the largest report Validate lets through
// (names, numbers and top at their bounds) and holds it to MaxReportSize.
func TestLargestReportFits(t *testing.T) {
	r := goodReport()
	r.Group, r.Member = strings.Repeat("g", maxNameLen), strings.Repeat("m", maxNameLen)
	r.Seq, r.Rescued, r.Conns = math.MaxUint64, math.MaxUint64, math.MaxInt64
	r.R, r.M, r.BytesPerSecond, r.RedirectsPerSecond = -math.MaxFloat64/3, math.SmallestNonzeroFloat64, 1.2345678901234567e-300, 1.2345678901234567e300
	r.Bandwidth, r.GroupRequestsPerSecond, r.Window, r.ServingLoad = r.RedirectsPerSecond, r.RedirectsPerSecond, r.RedirectsPerSecond, r.RedirectsPerSecond
	for i := range MaxTopPaths {
		r.Top = append(r.Top, PathCount{Path: "/" + strings.Repeat("%", MaxTopPathLen-3) + string(rune('a'+i)) + "a", Count: 1.2345678901234567e-300})
	}
	if err := checkTop(r.Top); err != nil {
		t.Fatalf("the largest top does not validate: %v", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxReportSize*3/4 {
		t.Errorf("the largest report is %d bytes, more than 3/4 of MaxReportSize %d", len(b), MaxReportSize)
	}
}

func TestMergeTop(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		lists [][]PathCount
		want  []PathCount
	}{
		{name: "none", want: []PathCount{}},
		{name: "one list", lists: [][]PathCount{{{"/a", 3}, {"/b", 1}}}, want: []PathCount{{"/a", 3}, {"/b", 1}}},
		{name: "sums per path", lists: [][]PathCount{{{"/a", 3}, {"/b", 1}}, {{"/b", 5}, {"/c", 2}}},
			want: []PathCount{{"/b", 6}, {"/a", 3}, {"/c", 2}}},
		{name: "ties by path", lists: [][]PathCount{{{"/b", 1}}, {{"/a", 1}}}, want: []PathCount{{"/a", 1}, {"/b", 1}}},
		{name: "cut to n", n: 2, lists: [][]PathCount{{{"/a", 3}, {"/b", 2}, {"/c", 1}}}, want: []PathCount{{"/a", 3}, {"/b", 2}}},
		{name: "zero counts left out", lists: [][]PathCount{{{"/a", 0}, {"/b", 1}}}, want: []PathCount{{"/b", 1}}},
		{name: "default n is 16", lists: [][]PathCount{manyTop(16), {{"/z", 0.5}}}, want: manyTop(16)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MergeTop(tc.n, tc.lists...); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MergeTop = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDecodeReportSchemes: the optional schemes decode, a report without
// them serves http only, and unknown, repeated or too many are refused.
func TestDecodeReportSchemes(t *testing.T) {
	with := func(extra string) string { return strings.TrimSuffix(goodJSON, "}") + "," + extra + "}" }
	tests := []struct {
		name        string
		body        string
		http, https bool
		err         string
	}{
		{name: "absent: http only", body: goodJSON, http: true},
		{name: "empty: http only", body: with(`"schemes":[]`), http: true},
		{name: "https only", body: with(`"schemes":["https"]`), https: true},
		{name: "both", body: with(`"schemes":["http","https"]`), http: true, https: true},
		{name: "unknown", body: with(`"schemes":["ftp"]`), err: `"ftp": want http or https`},
		{name: "twice", body: with(`"schemes":["https","https"]`), err: `"https" twice`},
		{name: "too many", body: with(`"schemes":["http","https","http"]`), err: "more than 2 items"},
		{name: "not strings", body: with(`"schemes":[1]`), err: "not a string"},
		{name: "not an array", body: with(`"schemes":"https"`), err: "not an array"},
		{name: "with a certificate's expiry", body: with(`"schemes":["https"],"cert_not_after":"2027-03-01T00:00:00Z"`), https: true},
		{name: "an expiry out of range", body: with(`"cert_not_after":"0001-01-02T00:00:00Z"`), err: "cert_not_after: year 1 out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeReport(strings.NewReader(tc.body), 0)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("DecodeReport = %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Serves(SchemeHTTP) != tc.http || r.Serves(SchemeHTTPS) != tc.https {
				t.Errorf("serves http %t https %t, want %t %t", r.Serves(SchemeHTTP), r.Serves(SchemeHTTPS), tc.http, tc.https)
			}
		})
	}
}
