package webtest

import (
	"os"
	"path/filepath"
	"testing"
)

// ReloadBaseYAML is the mirror config the reload tests of package mirror
// and cmd/mirror edit: a document root ("root") under ReloadDir's
// directory.
const ReloadBaseYAML = `listen: ["127.0.0.1:8080"]
admin: 127.0.0.1:9180
group: www.example.test
member: a
host: a.mirrors.example.test
root: root
capacity: 100
dnsd: {url: "http://127.0.0.1:8053", secret: s3cret}
`

// ReloadDir returns a new directory with two document roots (root,
// root2) and a corrupt GeoIP database (bad.mmdb), where the reload tests
// write their mirror.yaml.
func ReloadDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"root", "root2"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.mmdb"), []byte("\x8a\x13 not a MaxMind database \xff\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
