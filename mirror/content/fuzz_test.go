package content

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// fuzzLimits keep the fuzzer's inputs small.
var fuzzLimits = Limits{MaxFiles: 1000, MaxBytes: 1 << 20}

// FuzzDecodeIndex: whatever decodes is a valid index (sorted, unique,
// clean paths) that encodes to bytes that decode to the same index; what
// does not decode is refused with one of the package's sentinels.
func FuzzDecodeIndex(f *testing.F) {
	f.Add([]byte("transmirror-index 1 full 5 2\n0 1 1 a\n0 2 2.000000001 b%20c\n"))
	f.Add([]byte("transmirror-index 1 full 5 2\n0 1 1 a/b\n2 1 1 c\n"))
	f.Add([]byte("transmirror-index 1 full 5 1\n0 1 1 a/../b\n"))
	f.Add([]byte("transmirror-index 1 full 5 1\n0 1 -1.999999999 a%00\n"))
	f.Add([]byte("transmirror-index 1 full 1 0\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		x, err := DecodeIndex(bytes.NewReader(in), fuzzLimits)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		got := entries(x)
		if _, err := NewIndex(x.Version(), got); err != nil {
			t.Fatalf("decoded an invalid index: %v", err)
		}
		back, err := DecodeIndex(bytes.NewReader(encodeIndex(t, x)), fuzzLimits)
		if err != nil {
			t.Fatalf("re-encoded index does not decode: %v", err)
		}
		if back.Version() != x.Version() || !reflect.DeepEqual(entries(back), got) {
			t.Fatalf("round trip changed the index")
		}
	})
}

// FuzzDecodeChanges: whatever decodes is a valid change set that
// round-trips, and applying it to a fixed index either fails, changing
// nothing, or yields the index that Diff takes back to the same changes.
func FuzzDecodeChanges(f *testing.F) {
	f.Add([]byte("transmirror-index 1 changes 3 4 3\n+ 0 1 1 a\n~ 0 2 2 b\n- 0 c\n"))
	f.Add([]byte("transmirror-index 1 changes 3 4 1\n- 0 b\n"))
	f.Add([]byte("transmirror-index 1 changes 3 4 2\n+ 0 1 1 d/e\n2 0 1 1 f\n"))
	f.Add([]byte("transmirror-index 1 changes 3 3 0\n"))
	f.Add([]byte("transmirror-index 1 changes 3 4 1\n+ 0 1 1 ../x\n"))
	base, err := NewIndex(3, []Entry{{Path: "b", Size: 1, MTime: 1}, {Path: "c", Size: 1, MTime: 1}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ch, err := DecodeChanges(bytes.NewReader(in), fuzzLimits)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooMany) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		if err := checkChanges(ch); err != nil {
			t.Fatalf("decoded invalid changes: %v", err)
		}
		back, err := DecodeChanges(bytes.NewReader(encodeChanges(t, ch)), fuzzLimits)
		if err != nil || !reflect.DeepEqual(back, ch) {
			t.Fatalf("round trip: %v", err)
		}
		next, err := Apply(base, ch, fuzzLimits.MaxFiles)
		if err != nil {
			return
		}
		// Diff names each real change once; Apply took ch, so every one of
		// Diff's changes is in ch (ch may also modify a file to the same).
		for _, c := range Diff(base, next).Changes {
			if !containsChange(ch.Changes, c) {
				t.Fatalf("Diff after Apply has %+v, not in %+v", c, ch.Changes)
			}
		}
	})
}

func containsChange(cs []Change, c Change) bool {
	for _, o := range cs {
		if o == c {
			return true
		}
	}
	return false
}
