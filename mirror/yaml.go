package mirror

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// decodeStrict decodes data, the YAML text of file, into cfg with unknown
// keys refused, and returns where each key and value was written. Errors
// have the form "FILE:LINE:COL: KEY.PATH: what". The approach follows
// zones/load.go: walk the AST for positions, then decode with go-yaml's
// strict mode and map its error back onto the AST.
func decodeStrict(file string, data []byte, cfg any) (positions, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlError(file, nil, err)
	}
	pos := make(positions)
	docs := 0
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		docs++
		if docs > 1 {
			return nil, fmt.Errorf("%s:%s: more than one YAML document", file, tokenPos(doc.GetToken()))
		}
		ast.Walk(pos, doc.Body)
	}
	if docs == 0 {
		return pos, nil
	}
	err = yaml.UnmarshalWithOptions(data, cfg, yaml.Strict(),
		yaml.CustomUnmarshaler(func(d *Duration, b []byte) error {
			return parseText(b, "duration", func(s string) error { return d.UnmarshalText([]byte(s)) })
		}),
		yaml.CustomUnmarshaler(func(n *ByteSize, b []byte) error {
			return parseText(b, "size", func(s string) error { return n.UnmarshalText([]byte(s)) })
		}),
		yaml.CustomUnmarshaler(func(p *netip.Prefix, b []byte) error {
			return parseText(b, "prefix", func(s string) error {
				v, err := netip.ParsePrefix(s)
				if err != nil {
					return fmt.Errorf("invalid prefix %q: want e.g. 192.0.2.0/24 or 2001:db8::/32", s)
				}
				*p = v
				return nil
			})
		}),
	)
	if err != nil {
		return nil, yamlError(file, f, err)
	}
	return pos, nil
}

// positions maps a YAML path without the leading "$." ("backends[0].url")
// to where it was written; it is filled by walking the parsed file.
type positions map[string]token.Position

// Visit records the position of every key and value (ast.Visitor).
func (p positions) Visit(n ast.Node) ast.Visitor {
	path := trimPath(n.GetPath())
	switch n := n.(type) {
	case *ast.MappingValueNode:
		if n.Key != nil && n.Key.GetToken() != nil {
			p.add(path, n.Key.GetToken())
		}
	case *ast.MappingNode:
		if len(n.Values) > 0 && n.Values[0].Key != nil && n.Values[0].Key.GetToken() != nil {
			p.add(path, n.Values[0].Key.GetToken())
		}
	default:
		if tk := n.GetToken(); tk != nil {
			p.add(path, tk)
		}
	}
	return p
}

func (p positions) add(path string, tk *token.Token) {
	if _, ok := p[path]; !ok && tk.Position != nil {
		p[path] = *tk.Position
	}
}

// at returns the position of path, or of its nearest ancestor written.
func (p positions) at(path string) (token.Position, bool) {
	for {
		if pos, ok := p[path]; ok {
			return pos, true
		}
		if path == "" {
			return token.Position{}, false
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			path = ""
		} else {
			path = path[:i]
		}
	}
}

// pathOf returns the path of the node written at tk, or "".
func pathOf(f *ast.File, tk *token.Token) string {
	if f == nil || tk == nil || tk.Position == nil {
		return ""
	}
	var found string
	v := visitFunc(func(n ast.Node) bool {
		if found != "" {
			return false
		}
		if t := n.GetToken(); t != nil && t.Position != nil &&
			t.Position.Offset == tk.Position.Offset && t.Position.Line == tk.Position.Line {
			found = trimPath(n.GetPath())
			return false
		}
		return true
	})
	walkDocs(f, v)
	return found
}

// nodeWithText returns the first scalar node whose text is s, or nil.
func nodeWithText(f *ast.File, s string) ast.Node {
	var found ast.Node
	v := visitFunc(func(n ast.Node) bool {
		if found != nil {
			return false
		}
		switch n.(type) {
		case *ast.StringNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode,
			*ast.NullNode, *ast.InfinityNode, *ast.NanNode, *ast.LiteralNode:
			if t := n.GetToken(); t != nil && t.Value == s {
				found = n
				return false
			}
		}
		return true
	})
	walkDocs(f, v)
	return found
}

func walkDocs(f *ast.File, v ast.Visitor) {
	if f == nil {
		return
	}
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			ast.Walk(v, doc.Body)
		}
	}
}

type visitFunc func(ast.Node) bool

func (v visitFunc) Visit(n ast.Node) ast.Visitor {
	if v(n) {
		return v
	}
	return nil
}

func trimPath(p string) string {
	p = strings.TrimPrefix(p, "$")
	return oneLine(strings.TrimPrefix(p, "."))
}

// oneLine escapes control characters (a key may hold a line break), so
// that every error stays on one line.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func tokenPos(tk *token.Token) string {
	if tk == nil || tk.Position == nil {
		return "1:1"
	}
	return fmt.Sprintf("%d:%d", tk.Position.Line, tk.Position.Column)
}

// textError is a scalar that its type's text form does not accept.
type textError struct {
	text string
	err  error
}

func (e *textError) Error() string { return e.err.Error() }

func (e *textError) Unwrap() error { return e.err }

// parseText decodes the YAML scalar b as a string and hands it to parse.
func parseText(b []byte, what string, parse func(string) error) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		text := strings.TrimSpace(string(b))
		return &textError{text: text, err: fmt.Errorf("invalid %s %q", what, text)}
	}
	if err := parse(s); err != nil {
		return &textError{text: s, err: err}
	}
	return nil
}

// yamlError turns a go-yaml error into one line: "FILE:LINE:COL: PATH: what".
func yamlError(file string, f *ast.File, err error) error {
	var te *textError
	if errors.As(err, &te) {
		if n := nodeWithText(f, te.text); n != nil {
			return fmt.Errorf("%s:%s: %s: %s", file, tokenPos(n.GetToken()), trimPath(n.GetPath()), te.Error())
		}
		return fmt.Errorf("%s:1:1: %s", file, te.Error())
	}
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return fmt.Errorf("%s:1:1: %s", file, firstLine(err.Error()))
	}
	var what string
	switch e := ye.(type) {
	case *yaml.UnknownFieldError:
		what = "unknown field"
	case *yaml.TypeError:
		what = fmt.Sprintf("wrong type: want %s, got %s", typeName(e.DstType), typeName(e.SrcType))
	case *yaml.UnexpectedNodeTypeError:
		what = fmt.Sprintf("wrong type: want %s, got %s", e.Expected.YAMLName(), e.Actual.YAMLName())
	case *yaml.OverflowError:
		what = fmt.Sprintf("%s is out of range for %s", e.SrcNum, typeName(e.DstType))
	default:
		what = firstLine(ye.GetMessage())
	}
	tk := ye.GetToken()
	where := file + ":" + tokenPos(tk)
	if path := pathOf(f, tk); path != "" {
		return fmt.Errorf("%s: %s: %s", where, path, what)
	}
	return fmt.Errorf("%s: %s", where, what)
}

// typeName names a Go type the way a config file's author thinks of it.
func typeName(t reflect.Type) string {
	if t == nil {
		return "nothing"
	}
	switch t {
	case reflect.TypeFor[Duration]():
		return "duration"
	case reflect.TypeFor[ByteSize]():
		return "size"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "sequence"
	case reflect.Map, reflect.Struct:
		return "mapping"
	case reflect.Pointer:
		return typeName(t.Elem())
	}
	return t.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
