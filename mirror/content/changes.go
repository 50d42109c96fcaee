package content

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Errors of the package.
var (
	// ErrInvalid is wrapped by every refusal of an index or change set
	// that is malformed, hostile or inconsistent.
	ErrInvalid = errors.New("content: invalid index")
	// ErrVersion is wrapped when a change set does not start at the
	// version that it is applied to.
	ErrVersion = errors.New("content: version mismatch")
	// ErrTooMany is wrapped when a scan or an index passes its bound on
	// files or bytes.
	ErrTooMany = errors.New("content: too many files")
)

// invalid is a refusal of an index or change set: "content: " and what
// is wrong, which errors.Is matches with ErrInvalid.
type invalid struct{ msg string }

func (e *invalid) Error() string        { return "content: " + e.msg }
func (e *invalid) Is(target error) bool { return target == ErrInvalid }

// errorf returns an invalid error.
func errorf(format string, args ...any) error {
	return &invalid{msg: fmt.Sprintf(format, args...)}
}

// Op is what a Change does to a path.
type Op byte

// The ops, as the wire format writes them.
const (
	// Add adds a path that the older index does not have.
	Add Op = '+'
	// Modify changes the size or mtime of a path that it has.
	Modify Op = '~'
	// Remove removes a path that it has.
	Remove Op = '-'
)

// Change is one path's change; Size and MTime are zero for Remove.
type Change struct {
	Op Op
	Entry
}

// Changes take an index from version From to version To: changes in
// strictly increasing path order, at most one per path.
type Changes struct {
	From, To uint64
	Changes  []Change
}

// Diff returns the changes from old to cur, in path order. Its paths are
// copies, so that a change set kept in a history does not hold the whole
// arena of either index.
func Diff(old, cur *Index) Changes {
	ch := Changes{From: old.Version(), To: cur.Version()}
	i, j := 0, 0
	for i < old.Len() || j < cur.Len() {
		switch {
		case j == cur.Len() || i < old.Len() && old.path(i) < cur.path(j):
			ch.Changes = append(ch.Changes, Change{Op: Remove, Entry: Entry{Path: strings.Clone(old.path(i))}})
			i++
		case i == old.Len() || cur.path(j) < old.path(i):
			ch.Changes = append(ch.Changes, Change{Op: Add, Entry: cur.clone(j)})
			j++
		default:
			if !cur.At(j).same(old.At(i)) {
				ch.Changes = append(ch.Changes, Change{Op: Modify, Entry: cur.clone(j)})
			}
			i, j = i+1, j+1
		}
	}
	return ch
}

// Apply returns the index that ch makes of x, at version ch.To, with at
// most maxFiles files (0: no bound). It refuses, changing nothing, a
// change set that does not start at x's version, is out of order, adds a
// path that x has or modifies or removes one that it does not have.
func Apply(x *Index, ch Changes, maxFiles int) (*Index, error) {
	if ch.From != x.Version() {
		return nil, fmt.Errorf("%w: changes from version %d, the index is at %d", ErrVersion, ch.From, x.Version())
	}
	if err := checkChanges(ch); err != nil {
		return nil, err
	}
	b := newBuilder(x.Len())
	i := 0
	for _, c := range ch.Changes {
		for i < x.Len() && x.path(i) < c.Path {
			b.add(x.At(i))
			i++
		}
		has := i < x.Len() && x.path(i) == c.Path
		switch {
		case c.Op == Add && has:
			return nil, errorf("add %q: the index has it", c.Path)
		case c.Op != Add && !has:
			return nil, errorf("%s %q: the index does not have it", c.Op, c.Path)
		case has:
			i++
		}
		if c.Op != Remove {
			b.add(c.Entry)
		}
	}
	for ; i < x.Len(); i++ {
		b.add(x.At(i))
	}
	if maxFiles > 0 && len(b.offs) > maxFiles {
		return nil, fmt.Errorf("%w: %d files, more than %d", ErrTooMany, len(b.offs), maxFiles)
	}
	if b.arena.Len() > math.MaxUint32 {
		return nil, fmt.Errorf("%w: %d bytes of paths", ErrTooMany, b.arena.Len())
	}
	return b.index(ch.To), nil
}

// checkChanges checks ch on its own: valid ops, paths and sizes, strictly
// increasing paths.
func checkChanges(ch Changes) error {
	for i, c := range ch.Changes {
		if c.Op != Add && c.Op != Modify && c.Op != Remove {
			return errorf("change %d: unknown op %q", i, byte(c.Op))
		}
		if err := checkEntry(c.Entry); err != nil {
			return err
		}
		if i > 0 && ch.Changes[i-1].Path >= c.Path {
			return errorf("path %q after %q: not in order or a duplicate", c.Path, ch.Changes[i-1].Path)
		}
	}
	return nil
}

// String returns the op's name.
func (o Op) String() string {
	switch o {
	case Add:
		return "add"
	case Modify:
		return "modify"
	case Remove:
		return "remove"
	}
	return fmt.Sprintf("op %q", byte(o))
}
