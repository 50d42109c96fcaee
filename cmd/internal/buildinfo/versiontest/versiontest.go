// Package versiontest is the -version test every command shares (tests
// only): the flag prints buildinfo's one line for the command, ending
// with the Go version, exits 0 and does nothing else.
package versiontest

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
)

// Case is one run of the command: its arguments and the exit status
// they must give (0: the version line, alone, on stdout).
type Case struct {
	Name string
	Args []string
	Code int
}

// Run runs the command name (its run function) with each case's
// arguments, as subtests.
func Run(t *testing.T, name string, run func(args []string, stdout, stderr io.Writer) int, cases []Case) {
	t.Helper()
	want := buildinfo.Version(name) + "\n"
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(c.Args, &out, &errb); code != c.Code {
				t.Fatalf("%s %q: exit %d, want %d (stderr %s)", name, c.Args, code, c.Code, errb.String())
			}
			if c.Code != 0 {
				return
			}
			got := out.String()
			if got != want || !strings.HasPrefix(got, name+" ") || !strings.HasSuffix(got, " "+runtime.Version()+"\n") {
				t.Errorf("stdout %q, want the one line %q", got, want)
			}
			if errb.Len() > 0 {
				t.Errorf("stderr %q, want nothing", errb.String())
			}
		})
	}
}
