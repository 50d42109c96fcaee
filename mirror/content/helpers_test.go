package content

import (
	"bytes"
	"testing"
)

// mustIndex is NewIndex of entries, which must be valid.
func mustIndex(t testing.TB, version uint64, entries ...Entry) *Index {
	t.Helper()
	x, err := NewIndex(version, entries)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// entries returns x's files.
func entries(x *Index) []Entry {
	var out []Entry
	for e := range x.All() {
		out = append(out, e)
	}
	return out
}

func encodeIndex(t testing.TB, x *Index) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := EncodeIndex(&b, x); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func encodeChanges(t testing.TB, ch Changes) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := EncodeChanges(&b, ch); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func e(p string, size, mtime int64) Entry { return Entry{Path: p, Size: size, MTime: mtime} }
