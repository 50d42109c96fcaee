package yamlconf

import (
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// Position is where something was written in a config file, 1-based.
type Position struct {
	Line   int
	Column int
}

// String returns "LINE:COL".
func (p Position) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Column) }

// Positions maps a key path ("groups[0].members[1].capacity", "" for the
// document) to where it was written: a key where it is a mapping's key,
// else the value. [Decode] fills it; a nil Positions knows nothing.
type Positions map[string]Position

// Has reports whether the file has the key path (written, even as null).
func (p Positions) Has(path string) bool {
	_, ok := p[path]
	return ok
}

// Of returns where exactly the key path was written.
func (p Positions) Of(path string) (Position, bool) {
	pos, ok := p[path]
	return pos, ok
}

// At returns where the key path was written or, when it was not, where
// its nearest written ancestor was: the place an error about a missing or
// defaulted key points to.
func (p Positions) At(path string) (Position, bool) {
	for {
		if pos, ok := p[path]; ok {
			return pos, true
		}
		if path == "" {
			return Position{}, false
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			path = ""
		} else {
			path = path[:i]
		}
	}
}

// walker records the position of every key and value (ast.Visitor).
type walker Positions

func (w walker) Visit(n ast.Node) ast.Visitor {
	path := trimPath(n.GetPath())
	switch n := n.(type) {
	case *ast.MappingValueNode:
		if n.Key != nil {
			w.add(path, n.Key.GetToken())
		}
	case *ast.MappingNode:
		if len(n.Values) > 0 && n.Values[0].Key != nil {
			w.add(path, n.Values[0].Key.GetToken())
		}
	default:
		w.add(path, n.GetToken())
	}
	return w
}

func (w walker) add(path string, tk *token.Token) {
	if tk == nil || tk.Position == nil {
		return
	}
	if _, ok := w[path]; !ok {
		w[path] = Position{Line: tk.Position.Line, Column: tk.Position.Column}
	}
}

// Default is the one rule of both daemons for a key's default: a key
// left out takes its default, a key written is taken as written. It sets
// *v to def when *v is zero and the key path was not written (pos lacks
// it, as a config built in Go lacks every key); a written 0 is left for
// the caller's check, which refuses it unless 0 means off, none or no
// limit for that key.
func Default[T comparable](pos Positions, path string, v *T, def T) {
	var zero T
	if *v == zero && !pos.Has(path) {
		*v = def
	}
}
