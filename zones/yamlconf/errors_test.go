package yamlconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestErrors(t *testing.T) {
	pos := Positions{"": {1, 1}, "groups": {2, 1}, "groups[0]": {3, 5}, "groups[0].capacity": {4, 7}}
	tests := []struct {
		name string
		errs *Errors
		add  func(e *Errors)
		want string
	}{
		{"object named by the message", NewErrors("d.yaml", pos, "zones"),
			func(e *Errors) { e.Errorf("groups[0].capacity", "group %q: capacity must be > 0", "www") },
			`d.yaml:4:7: group "www": capacity must be > 0`},
		{"object named by the key path", NewErrors("m.yaml", pos, "mirror"),
			func(e *Errors) { e.KeyErrorf("groups[0].capacity", "must be > 0, got %g", 0.0) },
			`m.yaml:4:7: groups[0].capacity: must be > 0, got 0`},
		{"not written: nearest ancestor", NewErrors("m.yaml", pos, "mirror"),
			func(e *Errors) { e.KeyErrorf("groups[0].name", "is required") },
			`m.yaml:3:5: groups[0].name: is required`},
		{"empty file: 1:1", NewErrors("m.yaml", nil, "mirror"),
			func(e *Errors) { e.KeyErrorf("listen", "at least one address is required") },
			`m.yaml:1:1: listen: at least one address is required`},
		{"no file: package prefix", NewErrors("", nil, "zones"),
			func(e *Errors) { e.Errorf("listen[0]", "listen %q: want HOST:PORT", "x") },
			`zones: listen "x": want HOST:PORT`},
		{"zero value", &Errors{},
			func(e *Errors) { e.Errorf("x", "bad") },
			`bad`},
		{"in order, one a line", NewErrors("d.yaml", pos, "zones"),
			func(e *Errors) {
				e.Errorf("groups", "first")
				e.Add(errors.New("zone.file:3: second"))
				e.Add(nil)
				e.KeyErrorf("", "third")
			},
			"d.yaml:2:1: first\nzone.file:3: second\nd.yaml:1:1: third"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.errs.Err() != nil || tt.errs.Len() != 0 {
				t.Fatal("a new collector has errors")
			}
			tt.add(tt.errs)
			if err := tt.errs.Err(); err == nil || err.Error() != tt.want {
				t.Errorf("Err() = %q, want %q", err, tt.want)
			}
			if n := tt.errs.Len(); n != strings.Count(tt.want, "\n")+1 {
				t.Errorf("Len() = %d", n)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	abs := filepath.Join(string(filepath.Separator), "var", "lib", "x.mmdb")
	tests := []struct {
		name, dir, file, want string
	}{
		{"relative", "conf", "x.mmdb", filepath.Join("conf", "x.mmdb")},
		{"absolute", "conf", abs, abs},
		{"no directory", "", "x.mmdb", "x.mmdb"},
		{"empty", "conf", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Resolve(tt.dir, tt.file); got != tt.want {
				t.Errorf("Resolve(%q, %q) = %q, want %q", tt.dir, tt.file, got, tt.want)
			}
		})
	}
}

func TestWithoutPath(t *testing.T) {
	_, err := os.Open(filepath.Join(t.TempDir(), "nope"))
	if got := WithoutPath(err); !errors.Is(got, os.ErrNotExist) || strings.Contains(got.Error(), "nope") {
		t.Errorf("WithoutPath(%v) = %v", err, got)
	}
	if other := errors.New("other"); WithoutPath(other) != other {
		t.Error("WithoutPath changed an error that is not a *PathError")
	}
}
