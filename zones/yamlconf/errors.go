package yamlconf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Errors collects the errors of one config file's validation, so that all
// of them are reported together. Each is prefixed with where the key path
// it is about was written ("FILE:LINE:COL: "); a key path that was not
// written (a required key left out) points to its nearest written
// ancestor, and to 1:1 when there is none. The zero Errors, or one for a
// config that was not read from a file, prefixes its errors with its
// package name instead.
type Errors struct {
	file string
	pos  Positions
	pkg  string
	errs []error
	warn []string
}

// NewErrors returns a collector for the config file named file whose key
// paths were written at pos. When file is "" (a config built from flags,
// or members added at run time) errors have no place in a file and are
// prefixed with "PKG: " instead.
func NewErrors(file string, pos Positions, pkg string) *Errors {
	return &Errors{file: file, pos: pos, pkg: pkg}
}

// Errorf records an error about the object at key path. The message names
// the object itself: `group "www": member "fra1": capacity must be > 0`.
func (e *Errors) Errorf(path, format string, args ...any) {
	e.errs = append(e.errs, errors.New(e.where(path)+fmt.Sprintf(format, args...)))
}

// KeyErrorf records an error about the value at key path, naming it by
// its key path: `capacity: must be > 0, got 0`.
func (e *Errors) KeyErrorf(path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	e.errs = append(e.errs, errors.New(e.where(path)+msg))
}

// Add records an error that names its own place (say, a line of a zone
// file that the config refers to).
func (e *Errors) Add(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

// Warnf records a warning about the object at key path, prefixed as an
// error would be: something that loads but that the operator should fix
// (an unprotected secret file). Warnings never fail a load.
func (e *Errors) Warnf(path, format string, args ...any) {
	e.warn = append(e.warn, e.where(path)+fmt.Sprintf(format, args...))
}

// Warnings returns the warnings recorded, in order.
func (e *Errors) Warnings() []string { return e.warn }

// Len is the number of errors recorded so far.
func (e *Errors) Len() int { return len(e.errs) }

// Err returns the errors recorded, joined one a line in the order they
// were recorded, or nil when there are none.
func (e *Errors) Err() error { return errors.Join(e.errs...) }

// where returns the prefix of an error about path.
func (e *Errors) where(path string) string {
	if e.file == "" {
		if e.pkg == "" {
			return ""
		}
		return e.pkg + ": "
	}
	p, ok := e.pos.At(path)
	if !ok {
		p = Position{Line: 1, Column: 1}
	}
	return e.file + ":" + p.String() + ": "
}

// Resolve returns name, a path written in the config file, relative to
// dir, the config file's directory; absolute names, "" and names of a
// config without a directory are returned as they are.
func Resolve(dir, name string) string {
	if name == "" || dir == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(dir, name)
}

// WithoutPath drops the operation and path of an *os.PathError, keeping
// its cause ("no such file or directory"), for an error that names the
// file as it was written rather than as it was resolved.
func WithoutPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
