package content

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReplica(t *testing.T) {
	v5 := mustIndex(t, 5, e("a", 1, 1), e("b", 2, 2))
	v6 := mustIndex(t, 6, e("a", 1, 1), e("c", 3, 3))
	steps := []struct {
		name    string
		body    []byte
		err     string
		version uint64 // of the copy after the step
		files   []Entry
	}{
		{"changes before any full", encodeChanges(t, Diff(v5, v6)), "changes from version 5, the index is at 0", 0, nil},
		{"full", encodeIndex(t, v5), "", 5, entries(v5)},
		{"changes", encodeChanges(t, Diff(v5, v6)), "", 6, entries(v6)},
		{"the same changes again", encodeChanges(t, Diff(v5, v6)), "changes from version 5, the index is at 6", 6, entries(v6)},
		{"inconsistent: removes what it lacks", []byte("transmirror-index 1 changes 6 7 1\n- 0 zz\n"), `remove "zz": the index does not have it`, 6, entries(v6)},
		{"inconsistent: adds what it has", []byte("transmirror-index 1 changes 6 7 1\n+ 0 1 1 a\n"), `add "a": the index has it`, 6, entries(v6)},
		{"hostile: dotdot", []byte("transmirror-index 1 changes 6 7 1\n+ 0 1 1 ../etc/passwd\n"), `line 2: path "../etc/passwd"`, 6, entries(v6)},
		{"hostile: NUL", []byte("transmirror-index 1 full 9 1\n0 1 1 a%00\n"), "NUL", 6, entries(v6)},
		{"hostile: huge", []byte("transmirror-index 1 full 9 100000000000\n"), "more than 10000000", 6, entries(v6)},
		{"truncated full", []byte("transmirror-index 1 full 9 2\n0 1 1 a\n"), "truncated", 6, entries(v6)},
		{"garbage", []byte("<html>\n"), "not a header", 6, entries(v6)},
		{"a full replaces", encodeIndex(t, v5), "", 5, entries(v5)},
	}
	r := NewReplica(Limits{})
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := r.Update(bytes.NewReader(st.body))
			switch {
			case st.err == "" && err != nil:
				t.Fatalf("Update: %v", err)
			case st.err != "" && (err == nil || !strings.Contains(err.Error(), st.err)):
				t.Fatalf("Update = %v, want %q", err, st.err)
			case st.err != "" && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrVersion) && !errors.Is(err, ErrTooMany):
				t.Fatalf("Update = %v: no sentinel", err)
			}
			if r.Version() != st.version || !reflect.DeepEqual(entries(r.Index()), st.files) {
				t.Fatalf("copy at %d %v, want %d %v", r.Version(), entries(r.Index()), st.version, st.files)
			}
		})
	}
}
