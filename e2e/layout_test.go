package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the module path of the tree's packages.
const module = "github.com/transmirror/transmirror"

// layoutRow is one package's row of docs/layout.md.
type layoutRow struct {
	line     int
	anything bool     // "everything"
	may      []string // the packages it may import, module-relative
}

// readLayout parses the table of docs/layout.md: | `pkg` | job | imports |.
func readLayout(t *testing.T) map[string]layoutRow {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := make(map[string]layoutRow)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		pkg := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, dup := rows[pkg]; dup {
			t.Errorf("docs/layout.md:%d: %s has a second row", n, pkg)
		}
		r := layoutRow{line: n}
		switch imp := strings.TrimSpace(cells[3]); imp {
		case "everything":
			r.anything = true
		case "—":
		default:
			for _, p := range strings.Split(imp, ",") {
				r.may = append(r.may, strings.Trim(strings.TrimSpace(p), "`"))
			}
		}
		rows[pkg] = r
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestLayout holds the tree to docs/layout.md: every package of the module
// has a row, every row is a package, and no package imports one of the
// module that its row does not list (the table's order is the import
// order, so this is also the proof that nothing imports upwards and
// there is no cycle). Test files may import more: tests build whole
// stacks.
func TestLayout(t *testing.T) {
	rows := readLayout(t)
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := make(map[string]bool)
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		seen[pkg] = true
		r, ok := rows[pkg]
		if !ok {
			t.Errorf("package %s has no row in docs/layout.md", pkg)
			continue
		}
		for _, imp := range p.Imports {
			dep, in := strings.CutPrefix(imp, module+"/")
			if !in || r.anything || slices.Contains(r.may, dep) {
				continue
			}
			t.Errorf("%s imports %s, which its row (docs/layout.md:%d) does not list", pkg, dep, r.line)
		}
	}
	for pkg, r := range rows {
		if !seen[pkg] {
			t.Errorf("docs/layout.md:%d: %s is not a package of the module", r.line, pkg)
		}
	}
}
