package content

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDiff(t *testing.T) {
	base := []Entry{e("a", 1, 10), e("b/c", 2, 20), e("d", 3, 30)}
	tests := []struct {
		name string
		cur  []Entry
		want []Change
	}{
		{"same", base, nil},
		{"added", append([]Entry{e("0", 9, 9)}, base...), []Change{{Add, e("0", 9, 9)}}},
		{"removed", base[1:], []Change{{Op: Remove, Entry: Entry{Path: "a"}}}},
		{"size", []Entry{e("a", 1, 10), e("b/c", 5, 20), e("d", 3, 30)}, []Change{{Modify, e("b/c", 5, 20)}}},
		{"mtime", []Entry{e("a", 1, 10), e("b/c", 2, 20), e("d", 3, 31)}, []Change{{Modify, e("d", 3, 31)}}},
		{"all gone", nil, []Change{{Op: Remove, Entry: Entry{Path: "a"}}, {Op: Remove, Entry: Entry{Path: "b/c"}}, {Op: Remove, Entry: Entry{Path: "d"}}}},
		{"mixed", []Entry{e("b/c", 2, 21), e("c", 1, 1), e("d", 3, 30)}, []Change{
			{Op: Remove, Entry: Entry{Path: "a"}}, {Modify, e("b/c", 2, 21)}, {Add, e("c", 1, 1)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := mustIndex(t, 1, base...), mustIndex(t, 2, tc.cur...)
			ch := Diff(old, cur)
			if ch.From != 1 || ch.To != 2 || !reflect.DeepEqual(ch.Changes, tc.want) {
				t.Fatalf("Diff = %+v, want 1→2 %+v", ch, tc.want)
			}
			got, err := Apply(old, ch, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(entries(got), entries(cur)) || got.Version() != 2 {
				t.Fatalf("Apply(Diff) = %v at %d, want %v", entries(got), got.Version(), entries(cur))
			}
		})
	}
}

func TestApplyRefuses(t *testing.T) {
	x := mustIndex(t, 7, e("a", 1, 1), e("c", 1, 1))
	tests := []struct {
		name     string
		ch       Changes
		maxFiles int
		err      string
		is       error
	}{
		{"from another version", Changes{From: 6, To: 8}, 0, "changes from version 6, the index is at 7", ErrVersion},
		{"add what it has", Changes{From: 7, To: 8, Changes: []Change{{Add, e("a", 2, 2)}}}, 0, `add "a": the index has it`, ErrInvalid},
		{"modify what it lacks", Changes{From: 7, To: 8, Changes: []Change{{Modify, e("b", 2, 2)}}}, 0, `modify "b": the index does not have it`, ErrInvalid},
		{"remove what it lacks", Changes{From: 7, To: 8, Changes: []Change{{Op: Remove, Entry: Entry{Path: "z"}}}}, 0, `remove "z"`, ErrInvalid},
		{"duplicate", Changes{From: 7, To: 8, Changes: []Change{{Add, e("b", 1, 1)}, {Add, e("b", 1, 1)}}}, 0, "duplicate", ErrInvalid},
		{"out of order", Changes{From: 7, To: 8, Changes: []Change{{Add, e("d", 1, 1)}, {Add, e("b", 1, 1)}}}, 0, "not in order", ErrInvalid},
		{"dotdot", Changes{From: 7, To: 8, Changes: []Change{{Add, e("a/../b", 1, 1)}}}, 0, `path "a/../b": element ".."`, ErrInvalid},
		{"negative size", Changes{From: 7, To: 8, Changes: []Change{{Add, e("b", -1, 1)}}}, 0, "negative size", ErrInvalid},
		{"bad op", Changes{From: 7, To: 8, Changes: []Change{{'?', e("b", 1, 1)}}}, 0, "unknown op", ErrInvalid},
		{"too many", Changes{From: 7, To: 8, Changes: []Change{{Add, e("b", 1, 1)}}}, 2, "3 files, more than 2", ErrTooMany},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Apply(x, tc.ch, tc.maxFiles)
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, tc.is) {
				t.Fatalf("Apply = %v, %v; want %q (%v)", got, err, tc.err, tc.is)
			}
			if !strings.HasPrefix(err.Error(), "content: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestIndexLookup(t *testing.T) {
	x := mustIndex(t, 3, e("b", 2, 2), e("a", 1, 1), e("a/b", 3, 3))
	tests := []struct {
		name, path string
		want       Entry
		ok         bool
	}{
		{"first", "a", e("a", 1, 1), true},
		{"nested", "a/b", e("a/b", 3, 3), true},
		{"last", "b", e("b", 2, 2), true},
		{"between", "a/a", Entry{}, false},
		{"after", "c", Entry{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := x.Lookup(tc.path)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Lookup(%q) = %v, %v; want %v, %v", tc.path, got, ok, tc.want, tc.ok)
			}
		})
	}
	if x.Bytes() != len("a"+"a/b"+"b")+3*20 {
		t.Errorf("Bytes = %d", x.Bytes())
	}
	if got := x.Newest(); !got.Equal(time.Unix(0, 3)) {
		t.Errorf("Newest = %v, want a/b's mtime", got)
	}
	if got := (&Index{}).Newest(); !got.IsZero() {
		t.Errorf("Newest of an empty index = %v, want the zero time", got)
	}
	if y, err := Apply(x, Changes{From: 3, To: 4, Changes: []Change{{Remove, e("a/b", 3, 3)}}}, 0); err != nil || !y.Newest().Equal(time.Unix(0, 2)) {
		t.Errorf("Newest after a/b went = %v, %v; want b's mtime", y.Newest(), err)
	}
	if _, err := NewIndex(1, []Entry{e("a", 1, 1), e("a", 1, 1)}); err == nil {
		t.Error("NewIndex took a duplicate")
	}
}
