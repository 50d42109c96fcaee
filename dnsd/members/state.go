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

// readState reads the state file at path. A missing file is an empty
// state; anything else that is wrong is an error naming the file, so that a
// corrupt file is never silently replaced by an empty one.
func readState(path string) (persisted, error) {
	st := persisted{Version: stateVersion, Members: map[string][]api.MemberInfo{}, Drained: map[string][]string{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("members: state file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return st, fmt.Errorf("members: state file %s is corrupt (%s); fix or move it away, dnsd will not overwrite it", path, api.JSONErrorAt(data, err))
	}
	if dec.More() {
		return st, fmt.Errorf("members: state file %s is corrupt (data after the JSON object); fix or move it away", path)
	}
	if st.Version != stateVersion {
		return st, fmt.Errorf("members: state file %s: version %d, want %d", path, st.Version, stateVersion)
	}
	if st.Members == nil {
		st.Members = map[string][]api.MemberInfo{}
	}
	if st.Drained == nil {
		st.Drained = map[string][]string{}
	}
	return st, nil
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
