package members

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/transmirror/transmirror/dnsd/internal/atomicfile"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// stateVersion is the version of the state file format.
const stateVersion = 1

// persisted is dnsd's run-time state file: members added through the
// admin API and members drained by an operator, by group.
type persisted struct {
	Version int                         `json:"version"`
	Members map[string][]api.MemberInfo `json:"members"`
	Drained map[string][]string         `json:"drained"`
}

// maxStateGroupEntries bounds the run-time members, and the drained
// members, of one group that readState keeps: no group may have more
// members than zones.MaxGroupMembers, so the entries past it could never
// be served. They are counted, not kept, and are gone from the file at
// its next write.
const maxStateGroupEntries = zones.MaxGroupMembers

// stored is the state file as readState decodes it: each group's list
// holds at most maxStateGroupEntries entries.
type stored struct {
	Version int                                `json:"version"`
	Members map[string]*capped[api.MemberInfo] `json:"members"`
	Drained map[string]*capped[string]         `json:"drained"`
}

// capped is a JSON array of which only the first maxStateGroupEntries
// elements are decoded (strictly, unknown fields refused), the others
// only counted.
type capped[T any] struct {
	items   []T
	dropped int
}

// UnmarshalJSON decodes the array data.
func (c *capped[T]) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if t, err := dec.Token(); err != nil {
		return err
	} else if t == nil {
		return nil
	} else if d, ok := t.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("want an array, not %v", t)
	}
	for dec.More() {
		if len(c.items) < maxStateGroupEntries {
			var v T
			if err := dec.Decode(&v); err != nil {
				return err
			}
			c.items = append(c.items, v)
			continue
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
		c.dropped++
	}
	_, err := dec.Token()
	return err
}

// readState reads the state file at path, and says how many entries of
// each group it did not keep (past maxStateGroupEntries). A missing file
// is an empty state; anything else that is wrong is an error naming the
// file, so that a corrupt file is never silently replaced by an empty one.
func readState(path string) (persisted, map[string]int, error) {
	st := persisted{Version: stateVersion, Members: map[string][]api.MemberInfo{}, Drained: map[string][]string{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil, nil
	}
	if err != nil {
		return st, nil, fmt.Errorf("members: state file: %w", err)
	}
	var in stored
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return st, nil, fmt.Errorf("members: state file %s is corrupt (%s); fix or move it away, dnsd will not overwrite it", path, api.JSONErrorAt(data, err))
	}
	if dec.More() {
		return st, nil, fmt.Errorf("members: state file %s is corrupt (data after the JSON object); fix or move it away", path)
	}
	if in.Version != stateVersion {
		return st, nil, fmt.Errorf("members: state file %s: version %d, want %d", path, in.Version, stateVersion)
	}
	dropped := map[string]int{}
	for g, c := range in.Members {
		if c != nil {
			st.Members[g] = c.items
			dropped[g] += c.dropped
		}
	}
	for g, c := range in.Drained {
		if c != nil {
			st.Drained[g] = c.items
			dropped[g] += c.dropped
		}
	}
	for g, n := range dropped {
		if n == 0 {
			delete(dropped, g)
		}
	}
	return st, dropped, nil
}

// writeState writes st to path atomically: a temporary file in the same
// directory, fsync, rename over path, fsync of the directory.
func writeState(path string, st persisted) error {
	st.Version = stateVersion
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("members: state file: %w", err)
	}
	data = append(data, '\n')
	if err := atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("members: state file: %w", err)
	}
	return nil
}
