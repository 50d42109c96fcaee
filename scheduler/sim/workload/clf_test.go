package workload

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// read is one request as the tests compare it: the names resolved.
type read struct {
	At             string // RFC 3339 in UTC
	Client, Object string
	Status         uint16
	Size           uint64
}

func reads(w *Workload) []read {
	var out []read
	for _, r := range w.Requests {
		out = append(out, read{r.Time().Format(time.RFC3339), w.Clients[r.Client], w.Objects[r.Object], r.Status, r.Size})
	}
	return out
}

// TestReadLog: the lines of Common and Combined Log Format the classic
// traces hold (NASA's and ClarkNet's, a mirror's Combined log), each as
// the request it is.
func TestReadLog(t *testing.T) {
	tests := []struct {
		name, line string
		want       read
	}{
		{"common", `in24.inetnebr.com - - [01/Aug/1995:00:00:01 -0400] "GET /shuttle/missions/sts-68/news/sts-68-mcc-05.txt HTTP/1.0" 200 1839`,
			read{"1995-08-01T04:00:01Z", "in24.inetnebr.com", "/shuttle/missions/sts-68/news/sts-68-mcc-05.txt", 200, 1839}},
		{"combined", `192.0.2.7 - alice [04/Dec/2026:18:31:27 +0000] "GET /debian/pool/main/g/go/go_1.26.deb HTTP/1.1" 206 4294967296 "-" "Debian APT-HTTP/1.3 (2.6.1)"`,
			read{"2026-12-04T18:31:27Z", "192.0.2.7", "/debian/pool/main/g/go/go_1.26.deb", 206, 4294967296}},
		{"no body", `2001:db8::1 - - [04/Dec/2026:18:31:27 +0100] "HEAD /index.html HTTP/1.1" 304 -`,
			read{"2026-12-04T17:31:27Z", "2001:db8::1", "/index.html", 304, 0}},
		{"HTTP/0.9", `h.example - - [01/Jul/1995:00:00:12 -0400] "GET /history/" 200 1024`,
			read{"1995-07-01T04:00:12Z", "h.example", "/history/", 200, 1024}},
		{"query kept", `h.example - - [01/Jul/1995:00:00:12 -0400] "GET /cgi-bin/imagemap/countdown?99,176 HTTP/1.0" 302 110`,
			read{"1995-07-01T04:00:12Z", "h.example", "/cgi-bin/imagemap/countdown?99,176", 302, 110}},
		{"absolute URL", `h.example - - [01/Jul/1995:00:00:12 -0400] "GET http://www.example.org/a/b HTTP/1.0" 200 5`,
			read{"1995-07-01T04:00:12Z", "h.example", "/a/b", 200, 5}},
		{"escaped quote", `h.example - - [01/Jul/1995:00:00:12 -0400] "GET /a\"b HTTP/1.0" 404 0`,
			read{"1995-07-01T04:00:12Z", "h.example", `/a\"b`, 404, 0}},
		{"CRLF", "h.example - - [01/Jul/1995:00:00:12 -0400] \"GET /x HTTP/1.0\" 200 1\r",
			read{"1995-07-01T04:00:12Z", "h.example", "/x", 200, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, st, err := ReadLog(strings.NewReader(tt.line + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := reads(w); !slices.Equal(got, []read{tt.want}) || st.Broken != 0 {
				t.Errorf("got %+v (broken %v), want %+v", got, st.FirstBroken, tt.want)
			}
		})
	}
}

// TestReadLogBroken: each broken line is counted with its number and
// why, and the lines after it are read.
func TestReadLogBroken(t *testing.T) {
	good := `h - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 1`
	tests := []struct{ name, line, why string }{
		{"empty host", ` - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 1`, "no client host"},
		{"no date", `h - - "GET /a HTTP/1.0" 200 1`, "no [date]"},
		{"bad date", `h - - [1995-07-01 00:00:01] "GET /a HTTP/1.0" 200 1`, "date: want DD/Mon/YYYY:HH:MM:SS ±HHMM"},
		{"unterminated request", `h - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0 200 1`, `no "request"`},
		{"request without a path", `h - - [01/Jul/1995:00:00:01 -0400] "GET" 200 1`, "request without a path"},
		{"garbage request", `h - - [01/Jul/1995:00:00:01 -0400] "\x16\x03\x01\x02" 400 0`, "request without a path"},
		{"no size", `h - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200`, "no status and size"},
		{"bad status", `h - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" OK 1`, `status "OK"`},
		{"bad size", `h - - [01/Jul/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 1k`, `size "1k"`},
		{"truncated", `h - - [01/Jul/1995:00:0`, "no [date]"},
		{"too long", `h - - [01/Jul/1995:00:00:01 -0400] "GET /` + strings.Repeat("a", maxLineBytes) + ` HTTP/1.0" 200 1`, fmt.Sprintf("longer than %d bytes", maxLineBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, st, err := ReadLog(strings.NewReader(good + "\n" + tt.line + "\n\n" + good + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			want := []BrokenLine{{Line: 2, Reason: tt.why}}
			if len(w.Requests) != 2 || st.Lines != 4 || st.Blank != 1 || st.Broken != 1 || !slices.Equal(st.FirstBroken, want) {
				t.Errorf("%d requests, stats %+v; want 2 requests, 4 lines, 1 blank, broken %v", len(w.Requests), st, want)
			}
		})
	}
	t.Run("only the first kept", func(t *testing.T) {
		_, st, err := ReadLog(strings.NewReader(strings.Repeat("junk\n", 3*MaxBrokenKept)))
		if err != nil {
			t.Fatal(err)
		}
		if st.Broken != 3*MaxBrokenKept || len(st.FirstBroken) != MaxBrokenKept || st.FirstBroken[MaxBrokenKept-1].Line != MaxBrokenKept {
			t.Errorf("stats %+v, want %d broken and the first %d kept", st, 3*MaxBrokenKept, MaxBrokenKept)
		}
	})
}

// TestReadLogSortsAndInterns: an unsorted log comes out in time order
// (requests of one second in the log's order) with the disorder counted;
// a client and a path named twice have one index each; a gzip log reads
// as the same log plain.
func TestReadLogSortsAndInterns(t *testing.T) {
	log := `b - - [01/Jul/1995:00:00:02 -0400] "GET /x HTTP/1.0" 200 2
a - - [01/Jul/1995:00:00:01 -0400] "GET /y HTTP/1.0" 200 1
b - - [01/Jul/1995:00:00:02 -0400] "GET /y HTTP/1.0" 200 3
c - - [01/Jul/1995:00:00:01 -0400] "GET /x HTTP/1.0" 200 4
`
	want := []read{
		{"1995-07-01T04:00:01Z", "a", "/y", 200, 1},
		{"1995-07-01T04:00:01Z", "c", "/x", 200, 4},
		{"1995-07-01T04:00:02Z", "b", "/x", 200, 2},
		{"1995-07-01T04:00:02Z", "b", "/y", 200, 3},
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(log))
	zw.Close()
	for name, in := range map[string][]byte{"plain": []byte(log), "gzip": gz.Bytes()} {
		t.Run(name, func(t *testing.T) {
			w, st, err := ReadLog(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			if got := reads(w); !slices.Equal(got, want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, want)
			}
			if st.Unsorted != 2 {
				t.Errorf("unsorted %d, want 2 (a after b, c after the second b)", st.Unsorted)
			}
			if !slices.Equal(w.Clients, []string{"b", "a", "c"}) || !slices.Equal(w.Objects, []string{"/x", "/y"}) {
				t.Errorf("clients %q, objects %q: want each once, in order of appearance", w.Clients, w.Objects)
			}
		})
	}
	t.Run("broken gzip", func(t *testing.T) {
		if _, _, err := ReadLog(bytes.NewReader(gz.Bytes()[:len(gz.Bytes())/2])); err == nil {
			t.Error("half a gzip stream: no error")
		}
	})
}

// FuzzReadLog: ReadLog never panics, and every line it reads is a
// request, blank or broken.
func FuzzReadLog(f *testing.F) {
	f.Add([]byte(`in24.inetnebr.com - - [01/Aug/1995:00:00:01 -0400] "GET /a HTTP/1.0" 200 1839` + "\n"))
	f.Add([]byte(`192.0.2.7 - - [04/Dec/2026:18:31:27 +0000] "GET /a\"b HTTP/1.1" 206 - "-" "curl"` + "\r\n\n"))
	f.Add([]byte("\x1f\x8b\x08\x00junk"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, st, err := ReadLog(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(w.Requests)+st.Blank+st.Broken != st.Lines {
			t.Fatalf("%d requests + %d blank + %d broken != %d lines", len(w.Requests), st.Blank, st.Broken, st.Lines)
		}
		for i, r := range w.Requests {
			if int(r.Client) >= len(w.Clients) || int(r.Object) >= len(w.Objects) || i > 0 && r.At < w.Requests[i-1].At {
				t.Fatalf("request %d: %+v out of its tables or out of order", i, r)
			}
		}
	})
}

// BenchmarkReadLog reads a Common Log Format log of 100,000 lines (1,000
// clients, 5,000 paths, one second per 10 lines).
func BenchmarkReadLog(b *testing.B) {
	var log bytes.Buffer
	t0 := time.Date(1995, 8, 1, 0, 0, 0, 0, time.FixedZone("", -4*3600))
	for i := range 100000 {
		fmt.Fprintf(&log, "host%d.example.net - - [%s] \"GET /path/%d/file.html HTTP/1.0\" 200 %d\n",
			i*7919%1000, t0.Add(time.Duration(i/10)*time.Second).Format("02/Jan/2006:15:04:05 -0700"), i*104729%5000, i%30000)
	}
	b.SetBytes(int64(log.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, st, err := ReadLog(bytes.NewReader(log.Bytes())); err != nil || st.Broken != 0 {
			b.Fatal(err, st.FirstBroken)
		}
	}
}
