package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// TestWhere: two mirrors with content.index, a and b, b without one of
// a's files, and a dnsd whose group has them with probe URLs on their
// admin listeners. dnsd's content map gathers both indexes; `groupctl
// where` shows the file on a only (b lacking it), a file both hold on
// both, and dnsd's mirror list of the first names a's URL alone.
func TestWhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string][]string{"a": {"pool/main/only-a.deb", "dists/stable/InRelease"}, "b": {"dists/stable/InRelease"}}
	admins := map[string]string{}
	for _, name := range []string{"a", "b"} {
		root := filepath.Join(dir, name+"-root")
		for _, f := range files[name] {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("e2e "+f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s.mirrors.example.test
root: %s
content: {index: true}
capacity: 1000
run_queue: none
`, faultGroup, name, name, root)
		admins[name] = runMirror(t, writeFile(t, dir, name+".yaml", cfg), name).Admin
		whereWaitIndex(t, admins[name], len(files[name]))
	}
	d := startDNSD(t, true, "-config", whereDNSD(t, dir, admins))

	var wh api.Where
	probetest.Until(t, 20*time.Second, func() string {
		out, err := groupctl(t, d.Admin, "", "where", faultGroup, "/pool/main/only-a.deb", "-json")
		if err != nil {
			return fmt.Sprintf("groupctl where: %v: %s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &wh); err != nil {
			return fmt.Sprintf("groupctl where -json: %v: %s", err, out)
		}
		if len(wh.Holders) != 1 || wh.Holders[0].Name != "a" || !wh.Holders[0].Best || len(wh.Lacking) != 1 || wh.Lacking[0] != "b" {
			return fmt.Sprintf("where = %+v, want a holding it, b lacking", wh)
		}
		return ""
	})
	out, err := groupctl(t, d.Admin, "", "where", faultGroup, "/dists/stable/InRelease")
	if err != nil || !strings.Contains(out, "\na ") || !strings.Contains(out, "\nb ") {
		t.Errorf("groupctl where of a file both hold: %v:\n%s", err, out)
	}
	out, err = groupctl(t, d.Admin, "", "where", faultGroup, "/pool/../etc/passwd")
	if err == nil || !strings.Contains(out, "400") {
		t.Errorf("groupctl where of a path with ..: %v: %s, want a 400", err, out)
	}
	list := whereGet(t, "http://"+d.Admin+api.GroupMirrorList.Path(faultGroup)+"?path=/pool/main/only-a.deb")
	if list != "http://a.mirrors.example.test/pool/main/only-a.deb\n" {
		t.Errorf("mirror list = %q, want a's URL alone", list)
	}
}

// whereWaitIndex waits until the mirror's index (on its admin listener
// admin) holds n files.
func whereWaitIndex(t *testing.T, admin string, n int) {
	t.Helper()
	want := fmt.Sprintf(" %d\n", n)
	probetest.Until(t, 10*time.Second, func() string {
		body := whereGet(t, "http://"+admin+api.ContentIndex.Path())
		if first, _, _ := strings.Cut(body, "\n"); !strings.HasSuffix(first+"\n", want) {
			return fmt.Sprintf("index %q, want %d files", first, n)
		}
		return ""
	})
}

func whereGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// whereDNSD writes dnsd's config for TestWhere into dir: the group with
// members a and b, each probed on its admin listener.
func whereDNSD(t *testing.T, dir string, admins map[string]string) string {
	t.Helper()
	zone := readFileT(t, filepath.Join("testdata", "example.test.zone"))
	var mb strings.Builder
	for i, name := range []string{"a", "b"} {
		ip := fmt.Sprintf("127.0.73.%d", i+1)
		zone += fmt.Sprintf("%s.mirrors IN A %s\n", name, ip)
		fmt.Fprintf(&mb, "      - {name: %s, host: %s.mirrors.example.test, addresses: [%s], capacity: 1000, probe: \"http://%s/v1/load\"}\n",
			name, name, ip, admins[name])
	}
	writeFile(t, dir, "example.test.zone", zone)
	return writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e: where a file is
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: 1, max: 1}
    answers: 2
    policy: {name: weighted}
    members:
%s`, faultGroup, mb.String()))
}
