package content

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestEncodeIndex(t *testing.T) {
	x := mustIndex(t, 42,
		e("dists/stable/InRelease", 1024, 1700000000e9),
		e("dists/stable/Release", 2048, 1700000000e9+5e8),
		e("pool/a b%.deb", 7, -1),
		e("pool/a", 0, 0),
	)
	want := "transmirror-index 1 full 42 4\n" +
		"0 1024 1700000000 dists/stable/InRelease\n" +
		"13 2048 1700000000.500000000 Release\n" +
		"0 0 0 pool/a\n" +
		"6 7 -1.999999999 %20b%25.deb\n"
	got := encodeIndex(t, x)
	if string(got) != want {
		t.Fatalf("EncodeIndex =\n%s\nwant\n%s", got, want)
	}
	back, err := DecodeIndex(bytes.NewReader(got), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if back.Version() != 42 || !reflect.DeepEqual(entries(back), entries(x)) {
		t.Fatalf("DecodeIndex = %v at %d", entries(back), back.Version())
	}
}

func TestSharedPrefixNeverEmptiesTheSuffix(t *testing.T) {
	// "a" then "a/b": the whole of "a" is shared; "a/b" then "a/c" shares "a/".
	x := mustIndex(t, 1, e("a", 1, 1e9), e("a/b", 1, 1e9), e("a/c", 1, 1e9), e("ab", 1, 1e9))
	got := encodeIndex(t, x)
	want := "transmirror-index 1 full 1 4\n0 1 1 a\n1 1 1 /b\n2 1 1 c\n1 1 1 b\n"
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestEncodeChanges(t *testing.T) {
	ch := Changes{From: 41, To: 42, Changes: []Change{
		{Add, e("dists/stable/InRelease", 1024, 1700000000e9)},
		{Modify, e("dists/stable/Release", 2048, 1700000000e9+5e8)},
		{Op: Remove, Entry: Entry{Path: "pool/old.deb"}},
	}}
	got := encodeChanges(t, ch)
	want := "transmirror-index 1 changes 41 42 3\n" +
		"+ 0 1024 1700000000 dists/stable/InRelease\n" +
		"~ 13 2048 1700000000.500000000 Release\n" +
		"- 0 pool/old.deb\n"
	if string(got) != want {
		t.Fatalf("EncodeChanges =\n%s\nwant\n%s", got, want)
	}
	back, err := DecodeChanges(bytes.NewReader(got), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ch) {
		t.Fatalf("DecodeChanges = %+v, want %+v", back, ch)
	}
}

// TestDocExample decodes the change set that the package doc shows.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(doc), "//\ttransmirror-index 1 changes 41")
	first, rest, _ := strings.Cut(after, "\n")
	var b strings.Builder
	b.WriteString("transmirror-index 1 changes 41" + first + "\n")
	for line := range strings.SplitSeq(rest, "\n") {
		if !strings.HasPrefix(line, "//\t") {
			break
		}
		b.WriteString(strings.TrimPrefix(line, "//\t") + "\n")
	}
	ch, err := DecodeChanges(strings.NewReader(b.String()), Limits{})
	if err != nil || len(ch.Changes) != 3 {
		t.Fatalf("the doc's example: %v, %+v\n%s", err, ch, b.String())
	}
}

func TestDecodeRefuses(t *testing.T) {
	const full = "transmirror-index 1 full 5 "
	const changes = "transmirror-index 1 changes 4 5 "
	tests := []struct {
		name, in string
		lim      Limits
		err      string
		is       error
	}{
		{"empty", "", Limits{}, "empty input", ErrInvalid},
		{"not a header", "hello\n", Limits{}, `line 1: not a header "hello"`, ErrInvalid},
		{"format version", "transmirror-index 2 full 5 0\n", Limits{}, `format version "2"`, ErrInvalid},
		{"kind", "transmirror-index 1 partial 5 0\n", Limits{}, "not a header", ErrInvalid},
		{"bad count", full + "x\n", Limits{}, `"x" is not a number`, ErrInvalid},
		{"backwards", "transmirror-index 1 changes 5 4 0\n", Limits{}, "from version 5 back to 4", ErrInvalid},
		{"header counts too many", full + "3\n", Limits{MaxFiles: 2}, "3 entries, more than 2", ErrTooMany},
		{"truncated", full + "2\n0 1 1 a\n", Limits{}, "line 2: truncated: the header announced 2", ErrInvalid},
		{"no final newline", full + "1\n0 1 1 a", Limits{}, "line 2: no newline", ErrInvalid},
		{"trailing data", full + "1\n0 1 1 a\n0 1 1 b\n", Limits{}, "line 3: data after the 1 entries", ErrInvalid},
		{"dotdot", full + "1\n0 1 1 a/../b\n", Limits{}, `line 2: path "a/../b": element ".."`, ErrInvalid},
		{"dotdot by front coding", full + "2\n0 1 1 a/..\n4 1 1 /b\n", Limits{}, `line 2: path "a/.."`, ErrInvalid},
		{"NUL", full + "1\n0 1 1 a%00b\n", Limits{}, "NUL", ErrInvalid},
		{"absolute", full + "1\n0 1 1 /etc/passwd\n", Limits{}, `element ""`, ErrInvalid},
		{"bad utf8", full + "1\n0 1 1 a%FF\n", Limits{}, "UTF-8", ErrInvalid},
		{"duplicate", full + "2\n0 1 1 a\n0 1 1 a\n", Limits{}, `line 3: path "a" after "a": not in order or a duplicate`, ErrInvalid},
		{"out of order", full + "2\n0 1 1 b\n0 1 1 a\n", Limits{}, "not in order", ErrInvalid},
		{"shared too long", full + "2\n0 1 1 a\n2 1 1 b\n", Limits{}, `shared prefix "2"`, ErrInvalid},
		{"negative size", full + "1\n0 -1 1 a\n", Limits{}, `size "-1"`, ErrInvalid},
		{"bad mtime", full + "1\n0 1 1.5 a\n", Limits{}, "fraction must be 9 digits", ErrInvalid},
		{"zero fraction", full + "1\n0 1 1.000000000 a\n", Limits{}, "not all 0", ErrInvalid},
		{"mtime out of range", full + "1\n0 1 99999999999 a\n", Limits{}, "not seconds since 1970", ErrInvalid},
		{"fields", full + "1\n0 1 a\n", Limits{}, "3 fields, want 4", ErrInvalid},
		{"space in path", full + "1\n0 1 1 a b\n", Limits{}, "unescaped byte 0x20", ErrInvalid},
		{"long line", full + "1\n0 1 1 " + strings.Repeat("a", maxLine) + "\n", Limits{}, "longer than", ErrInvalid},
		{"too long path", full + "1\n0 1 1 " + strings.Repeat("a", MaxPathLen+1) + "\n", Limits{}, "more than 4096", ErrInvalid},
		{"too many bytes", full + "2\n0 1 1 a\n0 1 1 b\n", Limits{MaxBytes: 40}, "more than 40 bytes", ErrTooMany},
		{"full as changes", full + "0\n", Limits{}, "a full index, not a change set", ErrInvalid},
		{"unknown op", changes + "1\n* 0 1 1 a\n", Limits{}, `unknown op "*"`, ErrInvalid},
		{"no op", changes + "1\n01 1 a\n", Limits{}, "no op", ErrInvalid},
		{"remove fields", changes + "1\n- a\n", Limits{}, "2 fields, want 3", ErrInvalid},
		{"change duplicate", changes + "2\n+ 0 1 1 a\n- 0 a\n", Limits{}, "not in order or a duplicate", ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if strings.HasPrefix(tc.in, changes) || tc.name == "full as changes" || tc.name == "backwards" {
				_, err = DecodeChanges(strings.NewReader(tc.in), tc.lim)
			} else {
				_, err = DecodeIndex(strings.NewReader(tc.in), tc.lim)
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, tc.is) {
				t.Fatalf("decode = %v, want %q (%v)", err, tc.err, tc.is)
			}
			if !strings.HasPrefix(err.Error(), "content: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}
