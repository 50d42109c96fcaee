package probe

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestParseTrace(t *testing.T) {
	want := time.Date(2026, 12, 1, 12, 0, 1, 0, time.UTC)
	for _, tc := range []struct {
		name, line string
		want       time.Time
		err        string
	}{
		{"date -u", "Tue Dec  1 12:00:01 UTC 2026", want, ""},
		{"date -u GMT", "Tue Dec 01 12:00:01 GMT 2026\r", want, ""},
		{"rfc3339", "2026-12-01T12:00:01Z", want, ""},
		{"rfc3339 offset", "2026-12-01T13:00:01+01:00", want, ""},
		{"rfc3339 fraction", "2026-12-01T12:00:01.5Z", want.Add(500 * time.Millisecond), ""},
		{"unix", "1796126401", time.Unix(1796126401, 0).UTC(), ""},
		{"spaces", "  2026-12-01T12:00:01Z \t", want, ""},
		{"empty", "", time.Time{}, "empty"},
		{"local zone", "Tue Dec  1 12:00:01 CET 2026", time.Time{}, "not the output of date -u"},
		{"garbage", "hello", time.Time{}, "not the output"},
		{"negative", "-5", time.Time{}, "out of range"},
		{"huge", "99999999999999", time.Time{}, "out of range"},
		{"year 0", "0000-01-01T00:00:00Z", time.Time{}, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTrace(tc.line)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseTrace(%q) = %v, %v; want error with %q", tc.line, got, err, tc.err)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Fatalf("ParseTrace(%q) = %v, %v; want %v", tc.line, got, err, tc.want)
			}
		})
	}
}

func TestReadTrace(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, err string
	}{
		{"ftpsync", "Tue Dec  1 12:00:01 UTC 2026\nUsed ftpsync version: 20180513\nRunning on host: fra1\n", ""},
		{"no newline", "2026-12-01T12:00:01Z", ""},
		{"long first line", strings.Repeat("x", MaxTraceLine+1), "longer than"},
		{"long second line", "1796126401\n" + strings.Repeat("x", 4096), ""},
		{"missing", "", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if tc.name != "missing" {
				if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := ReadTrace(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadTrace = %v, %v; want error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.IsZero() {
				t.Fatalf("ReadTrace = %v, %v", got, err)
			}
		})
	}
}

// TestTraceGeneration checks that a failing trace gives no generation,
// counts every failure and warns once a minute at most.
func TestTraceGeneration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "master")
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	tr, err := NewTrace(TraceConfig{Path: path, Subsystem: "mirror", Clock: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if g := tr.Generation(); !g.IsZero() {
			t.Fatalf("missing trace: generation %v", g)
		}
	}
	now = now.Add(traceWarnEvery)
	tr.Generation()
	if n := testutil.ToFloat64(tr.errs); n != 4 {
		t.Errorf("errors counted: %v, want 4", n)
	}
	if n := strings.Count(logs.String(), "gives no generation"); n != 2 {
		t.Errorf("warnings: %d, want 2 (one a minute):\n%s", n, logs.String())
	}
	if err := os.WriteFile(path, []byte("1796126401\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g := tr.Generation(); !g.Equal(time.Unix(1796126401, 0)) {
		t.Errorf("generation %v", g)
	}
	if !strings.Contains(logs.String(), "readable again") {
		t.Errorf("no note of the recovery:\n%s", logs.String())
	}
}

func FuzzParseTrace(f *testing.F) {
	for _, s := range []string{"Tue Dec  1 12:00:01 UTC 2026", "2026-12-01T12:00:01Z", "1796126401", "", "Mon Jan 2 15:04:05 GMT 0000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		g, err := ParseTrace(line)
		if err != nil {
			if !g.IsZero() {
				t.Fatalf("error %v with generation %v", err, g)
			}
			return
		}
		if g.Location() != time.UTC || g.Year() < 1970 || g.Year() > 9999 {
			t.Fatalf("ParseTrace(%q) = %v", line, g)
		}
		// What a report carries decodes again.
		r := goodReport()
		r.Generation = g
		if err := r.Validate(); err != nil {
			t.Fatalf("report with generation %v: %v", g, err)
		}
	})
}

// TestReporterGeneration: the Reporter's reports carry what Generation
// gives, and none without it.
func TestReporterGeneration(t *testing.T) {
	gen := time.Date(2026, 12, 1, 12, 0, 1, 0, time.UTC)
	for _, tc := range []struct {
		name string
		fn   func() time.Time
		want time.Time
	}{
		{"none", nil, time.Time{}},
		{"zero", func() time.Time { return time.Time{} }, time.Time{}},
		{"set", func() time.Time { return gen }, gen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReporter(ReporterConfig{Group: "www", Member: "fra1", Capacity: 100,
				RunQueue: func() (float64, error) { return 0, nil }, Generation: tc.fn})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Snapshot(time.Now()).Generation; !got.Equal(tc.want) {
				t.Errorf("generation %v, want %v", got, tc.want)
			}
		})
	}
}
