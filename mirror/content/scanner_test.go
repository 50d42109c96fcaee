package content

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

func TestScannerVersions(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a", 1, t0)
	write(t, root, "b/c", 2, t0)
	s := NewScanner(root, ScanOptions{Clock: fixedClock(t0)})
	v0 := s.Current().Version()
	if v0 != uint64(t0.UnixMicro()) || s.Current().Len() != 0 {
		t.Fatalf("before a scan: version %d, %d files", v0, s.Current().Len())
	}
	steps := []struct {
		name  string
		edit  func()
		delta uint64 // versions since v0
		want  []Change
	}{
		{"first scan", func() {}, 1, []Change{{Add, e("a", 1, t0.UnixNano())}, {Add, e("b/c", 2, t0.UnixNano())}}},
		{"nothing changed", func() {}, 1, nil},
		{"a changed", func() { write(t, root, "a", 5, t0) }, 2, []Change{{Modify, e("a", 5, t0.UnixNano())}}},
		{"b/c removed, d added", func() {
			os.RemoveAll(filepath.Join(root, "b"))
			write(t, root, "d", 1, t0)
		}, 3, []Change{{Op: Remove, Entry: Entry{Path: "b/c"}}, {Add, e("d", 1, t0.UnixNano())}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.edit()
			ch, err := s.Scan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Current().Version(); got != v0+st.delta || ch.To != got {
				t.Fatalf("version %d (changes to %d), want %d", got, ch.To, v0+st.delta)
			}
			if !reflect.DeepEqual(ch.Changes, st.want) {
				t.Fatalf("changes %+v, want %+v", ch.Changes, st.want)
			}
		})
	}
}

func TestSince(t *testing.T) {
	v := func(files ...Entry) []Entry { return files }
	versions := [][]Entry{
		v(e("a", 1, 1), e("b", 1, 1), e("c", 1, 1)),
		v(e("a", 2, 1), e("b", 1, 1), e("c", 1, 1), e("d", 1, 1)), // a changed, d added
		v(e("a", 2, 1), e("c", 1, 1), e("d", 1, 1)),               // b removed
		v(e("a", 2, 1), e("b", 9, 9), e("c", 1, 1)),               // b back, d gone
	}
	var history []Changes
	prev := mustIndex(t, 10, versions[0]...)
	for i, files := range versions[1:] {
		x := mustIndex(t, uint64(11+i), files...)
		history = append(history, Diff(prev, x))
		prev = x
	}
	cur := prev
	tests := []struct {
		name  string
		since uint64
		ok    bool
	}{
		{"current", 13, true},
		{"one back", 12, true},
		{"two back", 11, true},
		{"oldest", 10, true},
		{"older than kept", 9, false},
		{"from the future", 14, false},
		{"zero", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch, x, ok := since(history, cur, tc.since)
			if ok != tc.ok || x != cur {
				t.Fatalf("since(%d) ok %v, want %v", tc.since, ok, tc.ok)
			}
			if !ok {
				return
			}
			old := mustIndex(t, tc.since, versions[tc.since-10]...)
			got, err := Apply(old, ch, 0)
			if err != nil {
				t.Fatalf("since(%d) = %+v does not apply: %v", tc.since, ch, err)
			}
			if !reflect.DeepEqual(entries(got), entries(cur)) || got.Version() != 13 {
				t.Fatalf("since(%d) leads to %v at %d, want %v", tc.since, entries(got), got.Version(), entries(cur))
			}
		})
	}
}

func TestTrimHistory(t *testing.T) {
	set := func(from uint64, n int) Changes {
		ch := Changes{From: from, To: from + 1}
		for range n {
			ch.Changes = append(ch.Changes, Change{Op: Remove, Entry: Entry{Path: "x"}})
		}
		return ch
	}
	h := []Changes{set(1, 5), set(2, 5), set(3, 5)}
	tests := []struct {
		name     string
		n, files int
		first    uint64
	}{
		{"all kept", 3, 100, 1},
		{"by count", 2, 100, 2},
		{"by size", 10, 20, 2},
		{"the newest alone is too big", 10, 8, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := trimHistory(h, tc.n, tc.files)
			switch {
			case tc.first == 0 && len(got) != 0:
				t.Fatalf("kept %d sets, want none", len(got))
			case tc.first != 0 && (len(got) == 0 || got[0].From != tc.first):
				t.Fatalf("kept %+v, want from %d", got, tc.first)
			}
		})
	}
}

// TestScanWhileServing: scans and the Handler's answers at the same time
// (for the race detector), each answer one that a Replica takes.
func TestScanWhileServing(t *testing.T) {
	root := t.TempDir()
	s := NewScanner(root, ScanOptions{})
	h := NewHandler(s, HandlerOptions{Limit: LimitOptions{Rate: 1e9, Burst: 1e9}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			write(t, root, filepath.Join("d", string(rune('a'+i))), i, t0)
			if _, err := s.Scan(context.Background()); err != nil {
				t.Error(err)
			}
		}
	}()
	r := NewReplica(Limits{})
	for {
		select {
		case <-done:
			return
		default:
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/content/index?since="+strconv.FormatUint(r.Version(), 10), nil))
		if err := r.Update(rec.Body); err != nil {
			t.Fatal(err)
		}
	}
}
