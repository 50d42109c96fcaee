package members

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/transmirror/transmirror/probe/api"
)

// Errors of a Store.
var (
	// ErrStoreUnavailable: the shared store (etcd) can not be reached, so
	// a membership change can not be made for the whole NS set. The
	// answers go on from the last known state; the change is refused, not
	// queued, and may be sent again once the store is back.
	ErrStoreUnavailable = errors.New("members: cluster store unavailable: membership changes are refused until it is back; answers go on from the last known state")
	// ErrConflict: another writer changed the group's state first (see
	// ConflictError).
	ErrConflict = errors.New("members: the group's run-time state changed meanwhile")
)

// GroupState is the run-time state of one group: the members added
// through GROUP-ADD, in the order they were added, and the drained
// members (run-time or from the config file). A GroupState is a value:
// whoever changes one changes a Clone.
type GroupState struct {
	Members []api.MemberInfo `json:"members,omitempty"`
	Drained []string         `json:"drained,omitempty"`
}

// Clone returns a copy that shares nothing with gs.
func (gs GroupState) Clone() GroupState {
	return GroupState{Members: slices.Clone(gs.Members), Drained: slices.Clone(gs.Drained)}
}

// Empty reports whether gs has no run-time member and no drain.
func (gs GroupState) Empty() bool { return len(gs.Members) == 0 && len(gs.Drained) == 0 }

// State is the run-time state of every group, and the revision of each
// group's state in its store (what a Save compares with; 0: never
// written). A file store counts its own revisions.
type State struct {
	Groups    map[string]GroupState
	Revisions map[string]int64
}

// NewState returns an empty State.
func NewState() State {
	return State{Groups: map[string]GroupState{}, Revisions: map[string]int64{}}
}

// Clone returns a copy of st that shares nothing with it.
func (st State) Clone() State {
	out := State{Groups: make(map[string]GroupState, len(st.Groups)), Revisions: maps.Clone(st.Revisions)}
	if out.Revisions == nil {
		out.Revisions = map[string]int64{}
	}
	for g, gs := range st.Groups {
		out.Groups[g] = gs.Clone()
	}
	return out
}

// Store keeps the run-time state: the state file of a single dnsd
// (FileStore), or a store that the dnsd of an NS set share (etcd, package
// cluster). Both methods return within the store's own timeout.
type Store interface {
	// Load reads the whole state (at start).
	Load() (State, error)
	// Save stores gs as group's state if it is still at revision rev,
	// and returns its new revision. When another writer changed it
	// first, it returns a *ConflictError with the state now stored;
	// when the store can not be reached, an error wrapping
	// ErrStoreUnavailable. On any error nothing was stored.
	Save(group string, rev int64, gs GroupState) (int64, error)
}

// ConflictError is the error of a Save that lost a race: the group's
// state is now State, at Revision. It wraps ErrConflict.
type ConflictError struct {
	Group    string
	State    GroupState
	Revision int64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: %s at revision %d", ErrConflict, e.Group, e.Revision)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// FileStore is the Store of a single dnsd: the state file, rewritten
// whole and atomically on every Save; "" keeps the state in memory only.
// It is also the local copy that a cluster store keeps of the shared
// state, so that a dnsd started while etcd is away serves what it last
// knew (Replace).
type FileStore struct {
	path string
	mu   sync.Mutex
	st   State // what the file holds, once read or written

	dropped map[string]int // entries of each group the last Load did not keep
}

// Dropped returns how many entries (run-time members and drains) of
// each group the last Load left out, past the most a group can have
// (zones.MaxGroupMembers); nil when none.
func (f *FileStore) Dropped() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.dropped)
}

var _ Store = (*FileStore)(nil)

// NewFileStore returns the store of the state file at path ("" for
// none). It reads nothing yet.
func NewFileStore(path string) *FileStore { return &FileStore{path: path, st: NewState()} }

// Path is the state file's path, "" for none.
func (f *FileStore) Path() string { return f.path }

// Load reads the state file; a missing one is an empty state, a corrupt
// one an error naming it.
func (f *FileStore) Load() (State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.path == "" {
		return f.st.Clone(), nil
	}
	p, dropped, err := readState(f.path)
	if err != nil {
		return State{}, err
	}
	f.st, f.dropped = fromPersisted(p), dropped
	return f.st.Clone(), nil
}

// Save writes the state file with group's state replaced by gs. A file
// has one writer, so rev is not compared.
func (f *FileStore) Save(group string, _ int64, gs GroupState) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := f.st.Clone()
	if gs.Empty() {
		delete(next.Groups, group)
	} else {
		next.Groups[group] = gs.Clone()
	}
	rev := next.Revisions[group] + 1
	next.Revisions[group] = rev
	if f.path != "" {
		if err := writeState(f.path, toPersisted(next)); err != nil {
			return 0, err
		}
	}
	f.st = next
	return rev, nil
}

// Replace writes st whole (revisions included in memory only).
func (f *FileStore) Replace(st State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.path != "" {
		if err := writeState(f.path, toPersisted(st)); err != nil {
			return err
		}
	}
	f.st = st.Clone()
	return nil
}

func fromPersisted(p persisted) State {
	st := NewState()
	for g, ms := range p.Members {
		gs := st.Groups[g]
		gs.Members = slices.Clone(ms)
		st.Groups[g] = gs
	}
	for g, ds := range p.Drained {
		gs := st.Groups[g]
		gs.Drained = slices.Clone(ds)
		st.Groups[g] = gs
	}
	for g, gs := range st.Groups {
		if gs.Empty() {
			delete(st.Groups, g)
		}
	}
	return st
}

func toPersisted(st State) persisted {
	p := persisted{Version: stateVersion, Members: map[string][]api.MemberInfo{}, Drained: map[string][]string{}}
	for g, gs := range st.Groups {
		if len(gs.Members) > 0 {
			p.Members[g] = slices.Clone(gs.Members)
		}
		if len(gs.Drained) > 0 {
			p.Drained[g] = slices.Clone(gs.Drained)
		}
	}
	return p
}
