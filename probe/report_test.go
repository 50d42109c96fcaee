package probe

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func goodReport() Report {
	return Report{
		Group: "www", Member: "fra1", Seq: 42,
		Time: time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC),
		R:    100.5, M: 1.25, Conns: 7, BytesPerSecond: 1e6, RedirectsPerSecond: 2,
		Load: 1017.5, Capacity: 5000,
	}
}

const goodJSON = `{"group":"www","member":"fra1","seq":42,"time":"2025-03-01T12:00:00.123456789Z","r":100.5,"m":1.25,"conns":7,"bytes_per_second":1000000,"redirects_per_second":2,"load":1017.5,"capacity":5000}`

func TestReportJSONRoundTrip(t *testing.T) {
	b, err := json.Marshal(goodReport())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != goodJSON {
		t.Errorf("marshal:\n got %s\nwant %s", b, goodJSON)
	}
	got, err := DecodeReport(strings.NewReader(string(b)), 0)
	if err != nil {
		t.Fatalf("DecodeReport: %v", err)
	}
	if want := goodReport(); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
}

// TestDecodeReportBandwidth checks the optional bandwidth field: a report
// of an older mirror, without it, decodes with no bandwidth limit; one
// with it keeps it; and a report without a bandwidth encodes without the
// field, as older mirrors sent it, so that an older dnsd takes it.
func TestDecodeReportBandwidth(t *testing.T) {
	withBandwidth := strings.Replace(goodJSON, `"capacity":5000`, `"capacity":5000,"bandwidth":125000000`, 1)
	tests := []struct {
		name string
		in   string
		want float64
	}{
		{"older mirror, no bandwidth field", goodJSON, 0},
		{"bandwidth", withBandwidth, 125e6},
		{"bandwidth 0", strings.Replace(goodJSON, `"capacity":5000`, `"capacity":5000,"bandwidth":0`, 1), 0},
		{"bandwidth first", strings.Replace(goodJSON, `{"group"`, `{"bandwidth":1e6,"group"`, 1), 1e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeReport(strings.NewReader(tt.in), 0)
			if err != nil {
				t.Fatalf("DecodeReport: %v", err)
			}
			want := goodReport()
			want.Bandwidth = tt.want
			if !reflect.DeepEqual(r, want) {
				t.Errorf("got %+v, want %+v", r, want)
			}
		})
	}
	b, err := json.Marshal(goodReport())
	if err != nil || string(b) != goodJSON {
		t.Errorf("a report without a bandwidth encodes as %s, %v; want the older JSON %s", b, err, goodJSON)
	}
	r := goodReport()
	r.Bandwidth = 125e6
	if b, err := json.Marshal(r); err != nil || string(b) != withBandwidth {
		t.Errorf("a report with a bandwidth encodes as %s, %v; want %s", b, err, withBandwidth)
	}
}

func TestDecodeReportErrors(t *testing.T) {
	replace := func(old, new string) string { return strings.Replace(goodJSON, old, new, 1) }
	tests := []struct {
		name string
		in   string
		max  int64
		want error
		sub  string
	}{
		{"empty", "", 0, ErrReportSyntax, "EOF"},
		{"array", "[]", 0, ErrReportSyntax, "not a JSON object"},
		{"unknown field", replace(`"capacity"`, `"extra":1,"capacity"`), 0, ErrReportSyntax, `unknown field "extra"`},
		{"case folded name", replace(`"group"`, `"Group"`), 0, ErrReportSyntax, `unknown field "Group"`},
		{"duplicate field", replace(`"seq":42`, `"seq":42,"seq":43`), 0, ErrReportSyntax, `duplicate field "seq"`},
		{"missing field", replace(`"conns":7,`, ``), 0, ErrReportSyntax, `missing field "conns"`},
		{"null", replace(`"r":100.5`, `"r":null`), 0, ErrReportSyntax, `"r": null`},
		{"nested", replace(`"m":1.25`, `"m":{"x":1}`), 0, ErrReportSyntax, `not a scalar`},
		{"wrong type", replace(`"seq":42`, `"seq":"42"`), 0, ErrReportSyntax, "string"},
		{"negative seq", replace(`"seq":42`, `"seq":-1`), 0, ErrReportSyntax, "uint64"},
		{"fractional conns", replace(`"conns":7`, `"conns":7.5`), 0, ErrReportSyntax, "int64"},
		{"bad time", replace(`2025-03-01T12:00:00.123456789Z`, `yesterday`), 0, ErrReportSyntax, "parsing time"},
		{"trailing object", goodJSON + "{}", 0, ErrReportSyntax, "trailing data"},
		{"trailing garbage", goodJSON + " x", 0, ErrReportSyntax, "trailing data"},
		{"too large", goodJSON, 100, ErrReportTooLarge, "more than 100 bytes"},
		{"empty group", replace(`"group":"www"`, `"group":""`), 0, ErrInvalidReport, "group: empty"},
		{"control char member", replace(`"member":"fra1"`, `"member":"fr\u0007a1"`), 0, ErrInvalidReport, "control character"},
		{"negative r", replace(`"r":100.5`, `"r":-100.5`), 0, ErrInvalidReport, "r: -100.5 is negative"},
		{"load inconsistent", replace(`"load":1017.5`, `"load":1000`), 0, ErrInvalidReport, "not 10·(r + m)"},
		{"zero time", replace(`2025-03-01T12:00:00.123456789Z`, `0001-01-01T00:00:00Z`), 0, ErrInvalidReport, "time: missing"},
		{"huge number", replace(`"capacity":5000`, `"capacity":1e999`), 0, ErrReportSyntax, "capacity"},
		{"duplicate bandwidth", replace(`"capacity":5000`, `"capacity":5000,"bandwidth":1,"bandwidth":2`), 0, ErrReportSyntax, `duplicate field "bandwidth"`},
		{"null bandwidth", replace(`"capacity":5000`, `"capacity":5000,"bandwidth":null`), 0, ErrReportSyntax, `"bandwidth": null`},
		{"bandwidth as a string", replace(`"capacity":5000`, `"capacity":5000,"bandwidth":"1Gbit/s"`), 0, ErrReportSyntax, "string"},
		{"case folded bandwidth", replace(`"capacity":5000`, `"capacity":5000,"Bandwidth":1`), 0, ErrReportSyntax, `unknown field "Bandwidth"`},
		{"negative bandwidth", replace(`"capacity":5000`, `"capacity":5000,"bandwidth":-1`), 0, ErrInvalidReport, "bandwidth: -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeReport(strings.NewReader(tt.in), tt.max)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.sub) {
				t.Errorf("err = %q, want it to contain %q", err, tt.sub)
			}
			if !strings.HasPrefix(err.Error(), "probe: ") {
				t.Errorf("err = %q, want the package prefix", err)
			}
		})
	}
}

func TestReportValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Report)
		sub  string // "" for valid
	}{
		{"good", func(*Report) {}, ""},
		{"load rounded", func(r *Report) { r.Load = 1017.56 }, ""},
		{"load off", func(r *Report) { r.Load = 1017.7 }, "load"},
		{"nan", func(r *Report) { r.BytesPerSecond = math.NaN() }, "bytes_per_second: not finite"},
		{"inf m", func(r *Report) { r.M = math.Inf(1) }, "m: not finite"},
		{"negative conns", func(r *Report) { r.Conns = -1 }, "conns: -1 is negative"},
		{"negative capacity", func(r *Report) { r.Capacity = -1 }, "capacity"},
		{"bandwidth", func(r *Report) { r.Bandwidth = 125e6 }, ""},
		{"negative bandwidth", func(r *Report) { r.Bandwidth = -1 }, "bandwidth: -1 is negative"},
		{"nan bandwidth", func(r *Report) { r.Bandwidth = math.NaN() }, "bandwidth: not finite"},
		{"infinite bandwidth", func(r *Report) { r.Bandwidth = math.Inf(1) }, "bandwidth: not finite"},
		{"empty member", func(r *Report) { r.Member = "" }, "member: empty"},
		{"long group", func(r *Report) { r.Group = strings.Repeat("g", 254) }, "longer than"},
		{"big load relative", func(r *Report) { r.R, r.M, r.Load = 1e9, 0, 1e10+100 }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := goodReport()
			tt.edit(&r)
			err := r.Validate()
			switch {
			case tt.sub == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.sub != "" && (!errors.Is(err, ErrInvalidReport) || !strings.Contains(err.Error(), tt.sub)):
				t.Fatalf("Validate = %v, want ErrInvalidReport with %q", err, tt.sub)
			}
		})
	}
}

func FuzzDecodeReport(f *testing.F) {
	f.Add([]byte(goodJSON))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"group":"a","group":"b"}`))
	f.Add([]byte(strings.TrimSuffix(goodJSON, "}") + `,"top":[{"path":"/a","count":3},{"count":1.5,"path":"/b%20c"}],"rescued":7}`))
	f.Add([]byte(strings.TrimSuffix(goodJSON, "}") + `,"top":[]}`))
	f.Add([]byte(strings.TrimSuffix(goodJSON, "}") + `,"schemes":["http","https"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReport(strings.NewReader(string(b)), MaxReportSize)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded report does not validate: %v", err)
		}
		// What decodes re-encodes and decodes to the same report.
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := DecodeReport(strings.NewReader(string(out)), MaxReportSize)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if !r2.Time.Equal(r.Time) {
			t.Fatalf("time changed: %v → %v", r.Time, r2.Time)
		}
		r2.Time = r.Time
		if !reflect.DeepEqual(r2, r) {
			t.Fatalf("round trip changed %+v to %+v", r, r2)
		}
	})
}

func TestSameGroup(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"www.example.org", "www.example.org.", true},
		{"WWW.Example.org.", "www.example.org", true},
		{"www.example.org", "www.example.org", true},
		{"www.example.org", "ftp.example.org", false},
		{"www.example.org..", "www.example.org", false},
	}
	for _, tc := range cases {
		t.Run(tc.a+"|"+tc.b, func(t *testing.T) {
			if got := SameGroup(tc.a, tc.b); got != tc.want {
				t.Errorf("SameGroup(%q, %q) = %v", tc.a, tc.b, got)
			}
		})
	}
}

// TestDecodeReportGeneration checks the optional generation field: a
// report without it (an older mirror) decodes with none, one with it
// round-trips, and a malformed one is refused.
func TestDecodeReportGeneration(t *testing.T) {
	gen := time.Date(2026, 12, 1, 12, 0, 1, 0, time.UTC)
	withGen := strings.TrimSuffix(goodJSON, "}") + `,"generation":"2026-12-01T12:00:01Z"}`
	for _, tc := range []struct {
		name, body string
		want       time.Time
		err        string
	}{
		{"absent", goodJSON, time.Time{}, ""},
		{"present", withGen, gen, ""},
		{"not a time", strings.TrimSuffix(goodJSON, "}") + `,"generation":"yesterday"}`, time.Time{}, "malformed"},
		{"null", strings.TrimSuffix(goodJSON, "}") + `,"generation":null}`, time.Time{}, "null"},
		{"twice", strings.TrimSuffix(withGen, "}") + `,"generation":"2026-12-01T12:00:01Z"}`, time.Time{}, "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeReport(strings.NewReader(tc.body), 0)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("DecodeReport = %v; want error with %q", err, tc.err)
				}
				return
			}
			if err != nil || !r.Generation.Equal(tc.want) {
				t.Fatalf("DecodeReport = %v (generation %v); want %v", err, r.Generation, tc.want)
			}
			b, _ := json.Marshal(r)
			if got := strings.Contains(string(b), `"generation"`); got != !tc.want.IsZero() {
				t.Errorf("marshal %s: generation present %v", b, got)
			}
		})
	}
}
