package yamlconf

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

// Decode decodes data, the YAML text of the config file named file, into
// v (a pointer to a struct with yaml tags) and returns where each key and
// value was written. Unknown keys, wrong types, scalars that their type
// does not accept ([Duration], [ByteSize], [Bandwidth], netip.Addr,
// netip.Prefix), syntax errors, more than one document and YAML tags are
// errors of one line, "FILE:LINE:COL: KEY.PATH: what"; so is a key of
// retired (the first one written), before anything is decoded. A panic of the YAML decoder on
// malformed input is an error too. An empty file decodes to nothing: v is
// left as it is. Nothing is defaulted or validated here.
func Decode(file string, data []byte, v any, retired ...Retired) (Positions, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlError(file, nil, err)
	}
	pos := make(Positions)
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
		ast.Walk(walker(pos), doc.Body)
		if tag := findTag(doc.Body); tag != nil {
			return nil, fmt.Errorf("%s:%s: %s: YAML tag %s is not supported", file,
				tokenPos(tag.GetToken()), trimPath(tag.GetPath()), oneLine(tag.GetToken().Value))
		}
	}
	if docs == 0 {
		return pos, nil
	}
	if err := checkRetired(file, pos, retired); err != nil {
		return nil, err
	}
	if err := decode(data, v); err != nil {
		return nil, yamlError(file, f, err)
	}
	return pos, nil
}

// decode decodes data into v strictly. The decoder has panicked on
// malformed input that the parser accepted; such a panic is an error.
func decode(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed YAML (decoder failed: %v)", r)
		}
	}()
	return yaml.UnmarshalWithOptions(data, v, yaml.Strict(),
		yaml.CustomUnmarshaler(func(a *netip.Addr, b []byte) error {
			return parseText(b, "IP address", "", func(s string) (err error) { *a, err = netip.ParseAddr(s); return err })
		}),
		yaml.CustomUnmarshaler(func(p *netip.Prefix, b []byte) error {
			return parseText(b, "prefix", prefixHint, func(s string) (err error) { *p, err = netip.ParsePrefix(s); return err })
		}),
		yaml.CustomUnmarshaler(func(d *Duration, b []byte) error {
			return parseText(b, "duration", durationHint, func(s string) error { return d.UnmarshalText([]byte(s)) })
		}),
		yaml.CustomUnmarshaler(func(n *ByteSize, b []byte) error {
			return parseText(b, "size", sizeHint, func(s string) error { return n.UnmarshalText([]byte(s)) })
		}),
		yaml.CustomUnmarshaler(func(bw *Bandwidth, b []byte) error {
			return parseText(b, "bandwidth", bandwidthHint, func(s string) error { return bw.UnmarshalText([]byte(s)) })
		}),
	)
}

// findTag returns the first tag node ("!foo value") under n, or nil: a
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

// pathOf returns the key path of the node written at tk, or "".
func pathOf(f *ast.File, tk *token.Token) string {
	if tk == nil || tk.Position == nil {
		return ""
	}
	var found string
	walkDocs(f, visitFunc(func(n ast.Node) bool {
		if found != "" {
			return false
		}
		if t := n.GetToken(); t != nil && t.Position != nil &&
			t.Position.Offset == tk.Position.Offset && t.Position.Line == tk.Position.Line {
			found = trimPath(n.GetPath())
			return false
		}
		return true
	}))
	return found
}

// nodeWithText returns the first scalar node whose text is s, or nil.
func nodeWithText(f *ast.File, s string) ast.Node {
	var found ast.Node
	walkDocs(f, visitFunc(func(n ast.Node) bool {
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
	}))
	return found
}

// walkDocs walks every document of f (none when f is nil).
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

// trimPath turns a go-yaml path ("$.groups[0].name") into a key path
// ("groups[0].name").
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

// tokenPos returns "LINE:COL" of tk, or "1:1" when it has no position.
func tokenPos(tk *token.Token) string {
	if tk == nil || tk.Position == nil {
		return "1:1"
	}
	return fmt.Sprintf("%d:%d", tk.Position.Line, tk.Position.Column)
}

// textError is a scalar that its type's text form does not accept.
type textError struct {
	text string // the scalar as written
	what string // the type, as a config file's author calls it
	hint string // what would do, or ""
	err  error
}

func (e *textError) Error() string {
	msg := fmt.Sprintf("invalid %s %q", e.what, e.text)
	if e.hint != "" {
		msg += ": want " + e.hint
	}
	return msg
}

func (e *textError) Unwrap() error { return e.err }

// parseText decodes the YAML scalar b as a string and hands it to parse.
func parseText(b []byte, what, hint string, parse func(string) error) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return &textError{text: strings.TrimSpace(string(b)), what: what, hint: hint, err: err}
	}
	if err := parse(s); err != nil {
		return &textError{text: s, what: what, hint: hint, err: err}
	}
	return nil
}

// yamlError turns an error of go-yaml (or of decode) into one line:
// "FILE:LINE:COL: PATH: what".
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
		return fmt.Errorf("%s:1:1: %s", file, oneLine(firstLine(err.Error())))
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
		what = fmt.Sprintf("%s is out of range for %s", oneLine(e.SrcNum), typeName(e.DstType))
	default:
		what = oneLine(firstLine(ye.GetMessage()))
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
	case reflect.TypeFor[Bandwidth]():
		return "bandwidth"
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
