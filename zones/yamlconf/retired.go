package yamlconf

import (
	"errors"
	"fmt"
	"regexp"
)

// Retired is a key that config files no longer have (renamed, merged
// into another, or moved out of the config): [Decode] refuses it with an
// error that names it where it was written and says what to write
// instead, rather than "unknown field".
type Retired struct {
	// Path is the key path, with [] for any index: "groups[].secret_file".
	Path string
	// Instead says what to write instead: "write secret: {file: PATH}".
	Instead string
}

// listIndex matches the index of a list item in a key path.
var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// checkRetired returns an error for the first key of retired that pos
// has, in the order written: "FILE:LINE:COL: PATH: retired key: INSTEAD"
// (one line, as every error of Decode).
func checkRetired(file string, pos Positions, retired []Retired) error {
	var (
		first Position
		msg   string
	)
	for path, at := range pos {
		generic := listIndex.ReplaceAllString(path, "[]")
		for _, r := range retired {
			if r.Path != generic || msg != "" && !before(at, first) {
				continue
			}
			first, msg = at, fmt.Sprintf("%s:%s: %s: retired key: %s", file, at, oneLine(path), r.Instead)
		}
	}
	if msg == "" {
		return nil
	}
	return errors.New(msg)
}

// before reports whether a was written before b.
func before(a, b Position) bool {
	return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
}
