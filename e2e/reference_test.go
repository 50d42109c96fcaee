package e2e

import (
	"encoding"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/zones"
)

// TestConfigReference checks that the configuration references in docs/
// name exactly the keys of the config types: every key of the reference
// exists in the types, and every key of the types is in the reference.
func TestConfigReference(t *testing.T) {
	cases := []struct {
		name string
		file string
		typ  reflect.Type
	}{
		{"dnsd", "dnsd.yaml", reflect.TypeFor[zones.Config]()},
		{"mirror", "mirror.yaml", reflect.TypeFor[mirror.Config]()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "docs", "reference", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s: %v", tc.file, err)
			}
			inDoc := map[string]bool{}
			docKeys("", doc, inDoc)
			inType := map[string]bool{}
			typeKeys("", tc.typ, inType)
			var missing, unknown []string
			for k := range inType {
				if !inDoc[k] {
					missing = append(missing, k)
				}
			}
			for k := range inDoc {
				if !inType[k] {
					unknown = append(unknown, k)
				}
			}
			sort.Strings(missing)
			sort.Strings(unknown)
			if len(missing) > 0 {
				t.Errorf("docs/reference/%s lacks keys of the config types: %s", tc.file, strings.Join(missing, ", "))
			}
			if len(unknown) > 0 {
				t.Errorf("docs/reference/%s has keys the config types do not: %s", tc.file, strings.Join(unknown, ", "))
			}
			t.Logf("%d keys in both", len(inDoc))
			if got, want := leafCount(inDoc), statedCount(t, string(data)); got != want {
				t.Errorf("docs/reference/%s has %d leaf keys, its header says %d", tc.file, got, want)
			}
		})
	}
}

// leafCount is the number of key paths in keys with no key below them:
// the keys an operator writes a value for.
func leafCount(keys map[string]bool) int {
	n := 0
	for k := range keys {
		leaf := true
		for o := range keys {
			if strings.HasPrefix(o, k+".") || strings.HasPrefix(o, k+"[]") {
				leaf = false
				break
			}
		}
		if leaf {
			n++
		}
	}
	return n
}

// statedCount is the count a reference's header states, "# N keys: ...".
func statedCount(t *testing.T, text string) int {
	t.Helper()
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			if num, _, ok := strings.Cut(rest, " keys:"); ok {
				n, err := strconv.Atoi(num)
				if err == nil {
					return n
				}
			}
		}
	}
	t.Fatal("no \"# N keys:\" line in the header")
	return 0
}

// TestReadmeConfigReference checks that the README's dnsd reference names
// the same keys as docs/reference/dnsd.yaml.
func TestReadmeConfigReference(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "### Configuration reference")
	if !ok {
		t.Fatal("README.md has no \"### Configuration reference\" section")
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the README's configuration reference has no yaml block")
	}
	ref, err := os.ReadFile(filepath.Join("..", "docs", "reference", "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	keys := func(text string) []string {
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		docKeys("", doc, m)
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	if a, b := keys(block), keys(string(ref)); strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("README reference keys differ from docs/reference/dnsd.yaml:\nREADME: %v\ndocs:   %v", a, b)
	}
}

// docKeys collects the key paths of a decoded YAML document; list items
// are written "key[]".
func docKeys(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := join(prefix, k)
			out[p] = true
			docKeys(p, x, out)
		}
	case []any:
		for _, x := range v {
			docKeys(prefix+"[]", x, out)
		}
	}
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	yamlUnmarshaler = reflect.TypeFor[yaml.InterfaceUnmarshaler]()
)

// typeKeys collects the yaml key paths of a config struct type.
func typeKeys(prefix string, t reflect.Type, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(yamlUnmarshaler) {
		return // a scalar written as text (durations, sizes, addresses), or a value with its own forms (a secret)
	}
	switch t.Kind() {
	case reflect.Slice:
		typeKeys(prefix+"[]", t.Elem(), out)
	case reflect.Struct:
		for f := range t.Fields() {
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "-" || !f.IsExported() {
				continue
			}
			if tag == "" {
				tag = strings.ToLower(f.Name)
			}
			p := join(prefix, tag)
			out[p] = true
			typeKeys(p, f.Type, out)
		}
	}
}

func join(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}
