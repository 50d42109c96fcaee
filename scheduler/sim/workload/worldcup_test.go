package workload

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// wcRec is one record of the WorldCup98 binary format (ita_public_tools'
// struct request), as the tests write it.
type wcRec struct {
	ts, client, object, size    uint32
	method, status, typ, server uint8
}

// wcEncode writes recs as the data set stores them: each field in turn,
// big-endian, 20 bytes a record.
func wcEncode(recs ...wcRec) []byte {
	var out []byte
	for _, r := range recs {
		out = binary.BigEndian.AppendUint32(out, r.ts)
		out = binary.BigEndian.AppendUint32(out, r.client)
		out = binary.BigEndian.AppendUint32(out, r.object)
		out = binary.BigEndian.AppendUint32(out, r.size)
		out = append(out, r.method, r.status, r.typ, r.server)
	}
	return out
}

// gzipped returns b compressed as one gzip member.
func gzipped(t testing.TB, b []byte) []byte {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return gz.Bytes()
}

// wcStatus is a record's status byte: the HTTP version (definitions.h's
// HTTP_09 0 to HTTP_XX 3) in bits 7-6, the status code's index below.
func wcStatus(version, index uint8) uint8 { return version<<6 | index }

// wc0 is the first request of the tools' input/test_log, 30/Apr/1998:21:30:17
// GMT (its README).
const wc0 = 893971817

// TestReadWorldCup: records as the WorldCup98 data set stores them, each
// read plain and gzip, as the requests they are and the records that are
// broken.
func TestReadWorldCup(t *testing.T) {
	const http10 = 1 // HTTP_10
	ok := func(ts, client, object, size uint32) wcRec {
		return wcRec{ts: ts, client: client, object: object, size: size, status: wcStatus(http10, 2)}
	}
	tests := []struct {
		name             string
		in               []byte
		want             []read
		lines, unsorted  int
		broken           []BrokenLine
		clients, objects []string // nil: not checked
	}{
		{name: "layout", in: []byte{
			0x35, 0x48, 0xed, 0x69, // timestamp 893971817
			0x00, 0x00, 0x87, 0x28, // clientID 34600
			0x00, 0x00, 0x11, 0x99, // objectID 4505
			0x00, 0x00, 0x60, 0xa0, // size 24736
			0, 0x42, 1, 0x61, // GET; HTTP/1.0, 200; IMAGE; PARIS, server 1
		}, want: []read{{"1998-04-30T21:30:17Z", "34600", "/o/4505", 200, 24736}}, lines: 1,
			clients: []string{"34600"}, objects: []string{"/o/4505"}},
		{name: "no size", in: wcEncode(wcRec{ts: wc0, client: 9719, object: 3, size: wcNoSize, status: wcStatus(http10, 13)}),
			want: []read{{"1998-04-30T21:30:17Z", "9719", "/o/3", 304, 0}}, lines: 1},
		{name: "status codes", in: wcEncode(
			wcRec{ts: wc0, status: 0}, wcRec{ts: wc0, status: 2}, wcRec{ts: wc0, status: 8}, wcRec{ts: wc0, status: 9},
			wcRec{ts: wc0, status: 13}, wcRec{ts: wc0, status: 14}, wcRec{ts: wc0, status: 15}, wcRec{ts: wc0, status: 19},
			wcRec{ts: wc0, status: 30}, wcRec{ts: wc0, status: 31}, wcRec{ts: wc0, status: 36}, wcRec{ts: wc0, status: 37},
		), want: statuses(100, 200, 206, 300, 304, 305, 400, 404, 415, 500, 505, 0), lines: 12},
		{name: "HTTP version bits ignored", in: wcEncode(
			wcRec{ts: wc0, status: wcStatus(0, 2)}, wcRec{ts: wc0, status: wcStatus(1, 19)},
			wcRec{ts: wc0, status: wcStatus(2, 2)}, wcRec{ts: wc0, status: wcStatus(3, 19)},
		), want: statuses(200, 404, 200, 404), lines: 4},
		{name: "methods", in: wcEncode(
			wcRec{ts: wc0, status: 2, method: 0}, wcRec{ts: wc0, status: 2, method: 1}, wcRec{ts: wc0, status: 2, method: 2},
			wcRec{ts: wc0, status: 2, method: 7}, wcRec{ts: wc0, status: 2, method: 8}, wcRec{ts: wc0, status: 2, method: 9},
		), want: statuses(200, 200, 200, 200, 200), lines: 6,
			broken: []BrokenLine{{6, "method index 9 past the 9 methods"}}},
		{name: "file types and servers", in: wcEncode(
			wcRec{ts: wc0, status: 2, typ: 12, server: 0xff}, wcRec{ts: wc0, status: 2, typ: 13},
		), want: statuses(200), lines: 2, broken: []BrokenLine{{2, "file type index 13 past the 13 file types"}}},
		{name: "bad status index", in: wcEncode(ok(wc0, 1, 1, 10), wcRec{ts: wc0, status: 38}, wcRec{ts: wc0, status: 0xff}, ok(wc0+1, 1, 1, 11)),
			want: []read{{"1998-04-30T21:30:17Z", "1", "/o/1", 200, 10}, {"1998-04-30T21:30:18Z", "1", "/o/1", 200, 11}}, lines: 4,
			broken: []BrokenLine{{2, "status index 38 past the 38 status codes"}, {3, "status index 63 past the 38 status codes"}}},
		{name: "truncated tail", in: append(wcEncode(ok(wc0, 1, 1, 10), ok(wc0, 2, 1, 10)), 0x35, 0x48, 0xed, 0x69, 0, 0, 0x87),
			want:  []read{{"1998-04-30T21:30:17Z", "1", "/o/1", 200, 10}, {"1998-04-30T21:30:17Z", "2", "/o/1", 200, 10}},
			lines: 3, broken: []BrokenLine{{3, "truncated record: 7 of 20 bytes"}}},
		{name: "unsorted sorted stably", in: wcEncode(ok(wc0+1, 1, 1, 1), ok(wc0, 2, 2, 2), ok(wc0+1, 3, 3, 3), ok(wc0, 4, 4, 4)),
			want: []read{
				{"1998-04-30T21:30:17Z", "2", "/o/2", 200, 2}, {"1998-04-30T21:30:17Z", "4", "/o/4", 200, 4},
				{"1998-04-30T21:30:18Z", "1", "/o/1", 200, 1}, {"1998-04-30T21:30:18Z", "3", "/o/3", 200, 3},
			}, lines: 4, unsorted: 2},
		{name: "interning", in: wcEncode(ok(wc0, 7, 5, 1), ok(wc0, 9, 5, 2), ok(wc0, 7, 1, 3)),
			want: []read{
				{"1998-04-30T21:30:17Z", "7", "/o/5", 200, 1}, {"1998-04-30T21:30:17Z", "9", "/o/5", 200, 2},
				{"1998-04-30T21:30:17Z", "7", "/o/1", 200, 3},
			}, lines: 3, clients: []string{"7", "9"}, objects: []string{"/o/5", "/o/1"}},
		{name: "broken records not interned", in: wcEncode(wcRec{ts: wc0, client: 99, object: 99, status: 40}, ok(wc0, 7, 5, 1)),
			want: []read{{"1998-04-30T21:30:17Z", "7", "/o/5", 200, 1}}, lines: 2,
			broken:  []BrokenLine{{1, "status index 40 past the 38 status codes"}},
			clients: []string{"7"}, objects: []string{"/o/5"}},
		{name: "empty (days 1 to 4)", in: nil, lines: 0, clients: []string{}, objects: []string{}},
	}
	for _, tt := range tests {
		for enc, in := range map[string][]byte{"plain": tt.in, "gzip": gzipped(t, tt.in)} {
			t.Run(tt.name+"/"+enc, func(t *testing.T) {
				w, st, err := ReadWorldCup(bytes.NewReader(in))
				if err != nil {
					t.Fatal(err)
				}
				if got := reads(w); !slices.Equal(got, tt.want) {
					t.Errorf("got\n%+v\nwant\n%+v", got, tt.want)
				}
				if st.Lines != tt.lines || st.Blank != 0 || st.Broken != len(tt.broken) || !slices.Equal(st.FirstBroken, tt.broken) || st.Unsorted != tt.unsorted {
					t.Errorf("stats %+v, want %d lines, broken %v, %d unsorted", st, tt.lines, tt.broken, tt.unsorted)
				}
				if tt.clients != nil && (!slices.Equal(w.Clients, tt.clients) || !slices.Equal(w.Objects, tt.objects)) {
					t.Errorf("clients %q, objects %q; want %q, %q", w.Clients, w.Objects, tt.clients, tt.objects)
				}
			})
		}
	}
}

// statuses are requests at wc0 by client 0 for object 0, of no size,
// with these status codes.
func statuses(codes ...uint16) []read {
	var out []read
	for _, c := range codes {
		out = append(out, read{"1998-04-30T21:30:17Z", "0", "/o/0", c, 0})
	}
	return out
}

// TestReadWorldCupGzip: a day's files concatenated (gzip members one
// after the other) read as one log; a cut gzip stream is an error.
func TestReadWorldCupGzip(t *testing.T) {
	first := wcEncode(wcRec{ts: wc0, client: 1, status: 2}, wcRec{ts: wc0 + 1, client: 2, status: 2})
	second := wcEncode(wcRec{ts: wc0 + 2, client: 1, status: 2})
	tests := []struct {
		name     string
		in       []byte
		requests int
		wantErr  bool
	}{
		{"concatenated members", append(gzipped(t, first), gzipped(t, second)...), 3, false},
		{"cut stream", gzipped(t, first)[:20], 0, true},
		{"bad header", []byte{0x1f, 0x8b, 0, 0}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, _, err := ReadWorldCup(bytes.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if err == nil && (len(w.Requests) != tt.requests || !slices.Equal(w.Clients, []string{"1", "2"})) {
				t.Errorf("%d requests of clients %q, want %d of [1 2]", len(w.Requests), w.Clients, tt.requests)
			}
		})
	}
}

// wcRecreate writes recs as the tools' recreate.c prints them in Common
// Log Format, with its tables (MethodNames, ProtocolNames, CodeNames), an
// object's URL being "/o/" and its ID.
func wcRecreate(recs []wcRec) string {
	methods := strings.Fields("GET HEAD POST PUT DELETE TRACE OPTIONS CONNECT OTHER")
	versions := strings.Fields("HTTP/0.9 HTTP/1.0 HTTP/1.1 HTTP/X.X")
	codes := strings.Fields(`100 101 200 201 202 203 204 205 206 300 301 302 303 304 305
		400 401 402 403 404 405 406 407 408 409 410 411 412 413 414 415 500 501 502 503 504 505 -`)
	var sb strings.Builder
	for _, r := range recs {
		size := fmt.Sprint(r.size)
		if r.size == wcNoSize {
			size = "-"
		}
		fmt.Fprintf(&sb, "%d - - [%s] \"%s /o/%d %s\" %s %s\n", r.client, time.Unix(int64(r.ts), 0).UTC().Format("02/Jan/2006:15:04:05 +0000"),
			methods[r.method], r.object, versions[r.status>>6], codes[r.status&0x3f], size)
	}
	return sb.String()
}

// TestReadWorldCupAsRecreate: a log read from the binary format is the
// log ReadLog reads from what recreate makes of it, names and all.
func TestReadWorldCupAsRecreate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1998, 7))
	recs := make([]wcRec, 5000)
	for i := range recs {
		size := rng.Uint32N(1 << 20)
		if rng.IntN(10) == 0 {
			size = wcNoSize
		}
		recs[i] = wcRec{ts: wc0 + uint32(i/10) - rng.Uint32N(3), client: rng.Uint32N(300), object: rng.Uint32N(90000),
			size: size, method: uint8(rng.IntN(wcMethods)), status: wcStatus(uint8(rng.IntN(4)), uint8(rng.IntN(38))),
			typ: uint8(rng.IntN(wcFileTypes)), server: uint8(rng.IntN(256))}
	}
	var kept []wcRec // ReadLog counts recreate's status "-" (OTHER_CODES) broken
	for _, r := range recs {
		if r.status&0x3f != 37 {
			kept = append(kept, r)
		}
	}
	want, _, err := ReadLog(strings.NewReader(wcRecreate(kept)))
	if err != nil {
		t.Fatal(err)
	}
	got, st, err := ReadWorldCup(bytes.NewReader(wcEncode(kept...)))
	if err != nil || st.Broken != 0 || st.Unsorted == 0 {
		t.Fatalf("error %v, stats %+v: want none broken, some unsorted", err, st)
	}
	if !slices.Equal(reads(got), reads(want)) || !slices.Equal(got.Clients, want.Clients) || !slices.Equal(got.Objects, want.Objects) {
		t.Errorf("ReadWorldCup and ReadLog of recreate's output differ: %d and %d requests, %d and %d clients, %d and %d objects",
			len(got.Requests), len(want.Requests), len(got.Clients), len(want.Clients), len(got.Objects), len(want.Objects))
	}
}

// FuzzReadWorldCup: ReadWorldCup never panics; every record it reads is
// a request or broken, and the requests are in time order, inside the
// tables, with a status of the table.
func FuzzReadWorldCup(f *testing.F) {
	good := wcEncode(wcRec{ts: wc0, client: 34600, object: 4505, size: 24736, status: 0x42, typ: 1, server: 0x61},
		wcRec{ts: wc0 - 1, client: 232, object: 4505, size: wcNoSize, status: 0x4d})
	f.Add(good)
	f.Add(gzipped(f, good))
	f.Add(append(slices.Clone(good), 1, 2, 3))
	f.Add(wcEncode(wcRec{status: 38}, wcRec{method: 9}, wcRec{typ: 13}))
	f.Add([]byte("\x1f\x8b\x08\x00junk"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, st, err := ReadWorldCup(bytes.NewReader(data))
		if err != nil {
			return
		}
		if len(w.Requests)+st.Broken != st.Lines || st.Blank != 0 {
			t.Fatalf("%d requests + %d broken != %d records (%d blank)", len(w.Requests), st.Broken, st.Lines, st.Blank)
		}
		if gz := len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b; !gz && st.Lines != (len(data)+wcRecordSize-1)/wcRecordSize {
			t.Fatalf("%d records of %d plain bytes", st.Lines, len(data))
		}
		for i, r := range w.Requests {
			if int(r.Client) >= len(w.Clients) || int(r.Object) >= len(w.Objects) || i > 0 && r.At < w.Requests[i-1].At ||
				!slices.Contains(wcStatusCodes[:], r.Status) || r.Size >= wcNoSize {
				t.Fatalf("request %d: %+v out of its tables, out of order or of a status or size not in the format", i, r)
			}
		}
	})
}

// BenchmarkReadWorldCup reads 1,000,000 records (50,000 clients, 20,000
// objects, 100 requests a second), plain and gzip.
func BenchmarkReadWorldCup(b *testing.B) {
	const n = 1_000_000
	recs := make([]wcRec, n)
	for i := range recs {
		recs[i] = wcRec{ts: wc0 + uint32(i/100), client: uint32(i * 7919 % 50000), object: uint32(i * 104729 % 20000),
			size: uint32(i % 30000), status: wcStatus(1, 2), typ: 1}
	}
	plain := wcEncode(recs...)
	for enc, in := range map[string][]byte{"plain": plain, "gzip": gzipped(b, plain)} {
		b.Run(enc, func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				if w, st, err := ReadWorldCup(bytes.NewReader(in)); err != nil || st.Broken != 0 || len(w.Requests) != n {
					b.Fatal(err, st.FirstBroken)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
		})
	}
}
