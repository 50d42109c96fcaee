package content

import (
	"iter"
	"sort"
	"strings"
	"time"
)

// Entry is one regular file of an index: its path relative to the root
// (see checkPath), its size in bytes and its modification time in
// nanoseconds since the Unix epoch.
type Entry struct {
	Path  string
	Size  int64
	MTime int64
}

// ModTime returns e's modification time.
func (e Entry) ModTime() time.Time { return time.Unix(0, e.MTime) }

// same reports whether e and o describe the same content.
func (e Entry) same(o Entry) bool { return e.Size == o.Size && e.MTime == o.MTime }

// Index is an immutable snapshot of a tree at one version: its files in
// path order. The paths are kept in one string arena with an offset each,
// beside two arrays of sizes and mtimes, so that a file costs its path's
// bytes and 20 bytes more (see Bytes). The zero Index is empty at version 0.
type Index struct {
	version uint64
	arena   string
	offs    []uint32 // start of path i in arena; it ends at offs[i+1] or len(arena)
	sizes   []int64
	mtimes  []int64
	newest  int64 // the largest of mtimes; 0 for none
}

// Newest returns the newest modification time of its files: the zero
// time for an empty index.
func (x *Index) Newest() time.Time {
	if len(x.offs) == 0 {
		return time.Time{}
	}
	return time.Unix(0, x.newest)
}

// Version returns the version of the index.
func (x *Index) Version() uint64 { return x.version }

// Len returns the number of files.
func (x *Index) Len() int { return len(x.offs) }

// Bytes returns the memory that x's arrays and arena hold.
func (x *Index) Bytes() int { return len(x.arena) + 20*len(x.offs) }

func (x *Index) path(i int) string {
	end := len(x.arena)
	if i+1 < len(x.offs) {
		end = int(x.offs[i+1])
	}
	return x.arena[x.offs[i]:end]
}

// At returns the i-th file in path order.
func (x *Index) At(i int) Entry {
	return Entry{Path: x.path(i), Size: x.sizes[i], MTime: x.mtimes[i]}
}

// clone is At(i) with a copy of the path.
func (x *Index) clone(i int) Entry {
	e := x.At(i)
	e.Path = strings.Clone(e.Path)
	return e
}

// Lookup returns the file at path p.
func (x *Index) Lookup(p string) (Entry, bool) {
	i := sort.Search(x.Len(), func(i int) bool { return x.path(i) >= p })
	if i < x.Len() && x.path(i) == p {
		return x.At(i), true
	}
	return Entry{}, false
}

// All yields every file in path order.
func (x *Index) All() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for i := range x.Len() {
			if !yield(x.At(i)) {
				return
			}
		}
	}
}

// builder builds an Index from entries appended in strictly increasing
// path order (the caller's to ensure).
type builder struct {
	arena  strings.Builder
	offs   []uint32
	sizes  []int64
	mtimes []int64
	newest int64
}

func newBuilder(n int) *builder {
	return &builder{offs: make([]uint32, 0, n), sizes: make([]int64, 0, n), mtimes: make([]int64, 0, n)}
}

func (b *builder) add(e Entry) {
	b.offs = append(b.offs, uint32(b.arena.Len()))
	b.arena.WriteString(e.Path)
	b.sizes = append(b.sizes, e.Size)
	b.mtimes = append(b.mtimes, e.MTime)
	if len(b.mtimes) == 1 || e.MTime > b.newest {
		b.newest = e.MTime
	}
}

func (b *builder) index(version uint64) *Index {
	return &Index{version: version, arena: b.arena.String(),
		offs: b.offs[:len(b.offs):len(b.offs)], sizes: b.sizes, mtimes: b.mtimes, newest: b.newest}
}

// NewIndex returns the index at version of entries, which it sorts; it
// refuses an invalid path, a negative size and a duplicate path.
func NewIndex(version uint64, entries []Entry) (*Index, error) {
	sorted := append([]Entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	return fromSorted(version, sorted)
}

// fromSorted is NewIndex for entries already in path order.
func fromSorted(version uint64, sorted []Entry) (*Index, error) {
	b := newBuilder(len(sorted))
	for i, e := range sorted {
		if err := checkEntry(e); err != nil {
			return nil, err
		}
		if i > 0 && sorted[i-1].Path == e.Path {
			return nil, errorf("duplicate path %q", e.Path)
		}
		b.add(e)
	}
	return b.index(version), nil
}

func checkEntry(e Entry) error {
	if err := checkPath(e.Path); err != nil {
		return errorf("%v", err)
	}
	if e.Size < 0 {
		return errorf("path %q: negative size %d", e.Path, e.Size)
	}
	return nil
}
