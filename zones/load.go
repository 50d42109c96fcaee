package zones

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Load reads the config file at path, decodes it strictly and builds the
// Set it describes (see Parse and Build).
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("zones: %w", err)
	}
	cfg, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	return Build(cfg)
}

// Parse decodes data, the YAML text of the config file named file, into a
// Config. Unknown keys, wrong types and syntax errors are errors of the form
// "FILE:LINE:COL: KEY.PATH: what". The Config remembers where each of its
// objects was written, so that Build can name file:line:col in its errors;
// nothing is defaulted or validated here.
func Parse(file string, data []byte) (*Config, error) {
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
			tk := doc.Start // the "---"
			if tk == nil {
				tk = doc.Body.GetToken()
			}
			return nil, fmt.Errorf("%s:%s: more than one YAML document", file, tokenPos(tk))
		}
		ast.Walk(pos, doc.Body)
		if tag := findTag(doc.Body); tag != nil {
			return nil, fmt.Errorf("%s:%s: %s: YAML tag %s is not supported", file,
				tokenPos(tag.GetToken()), trimPath(tag.GetPath()), oneLine(tag.GetToken().Value))
		}
	}
	cfg := &Config{File: file, pos: pos}
	if docs == 0 {
		return cfg, nil
	}
	if err := decode(data, cfg); err != nil {
		return nil, yamlError(file, f, err)
	}
	cfg.File, cfg.pos = file, pos
	return cfg, nil
}

// decode decodes data into cfg strictly. The decoder has panicked on
// malformed input that the parser accepted; such a panic is an error.
func decode(data []byte, cfg *Config) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed YAML (decoder failed: %v)", r)
		}
	}()
	return yaml.UnmarshalWithOptions(data, cfg, yaml.Strict(),
		yaml.CustomUnmarshaler(func(a *netip.Addr, b []byte) error {
			return parseText(b, "IP address", func(s string) (err error) { *a, err = netip.ParseAddr(s); return err })
		}),
		yaml.CustomUnmarshaler(func(p *netip.Prefix, b []byte) error {
			return parseText(b, "prefix", func(s string) (err error) { *p, err = netip.ParsePrefix(s); return err })
		}),
		yaml.CustomUnmarshaler(func(d *Duration, b []byte) error {
			return parseText(b, "duration", func(s string) error { return d.UnmarshalText([]byte(s)) })
		}),
	)
}

// findTag returns the first tag node ("!foo value") under n, or nil: the
// config has no use for tags, and the decoder mishandles some.
func findTag(n ast.Node) ast.Node {
	var found ast.Node
	ast.Walk(visitFunc(func(n ast.Node) bool {
		if found != nil {
			return false
		}
		if n.Type() == ast.TagType {
			found = n
			return false
		}
		return true
	}), n)
	return found
}

// positions maps a YAML path without the leading "$." ("groups[0].name")
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
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			ast.Walk(v, doc.Body)
		}
	}
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
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			ast.Walk(v, doc.Body)
		}
	}
	return found
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
	what string
	err  error
}

func (e *textError) Error() string {
	if e.what == "duration" {
		return fmt.Sprintf("invalid duration %q: want e.g. 10s or 1m30s", e.text)
	}
	return fmt.Sprintf("invalid %s %q", e.what, e.text)
}

func (e *textError) Unwrap() error { return e.err }

// parseText decodes the YAML scalar b as a string and hands it to parse.
func parseText(b []byte, what string, parse func(string) error) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return &textError{text: strings.TrimSpace(string(b)), what: what, err: err}
	}
	if err := parse(s); err != nil {
		return &textError{text: s, what: what, err: err}
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
		return fmt.Errorf("%s: %s", file, te.Error())
	}
	var ye yaml.Error
	if !errors.As(err, &ye) {
		return fmt.Errorf("%s: %s", file, firstLine(err.Error()))
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
	case reflect.TypeFor[netip.Addr]():
		return "IP address"
	case reflect.TypeFor[netip.Prefix]():
		return "prefix"
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
