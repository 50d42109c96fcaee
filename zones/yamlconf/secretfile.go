package yamlconf

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// UnprotectedMode is the permission bits that make a secret or token
// file "unprotected": any access by its group or by others.
const UnprotectedMode fs.FileMode = 0o077

// ReadSecretFile reads the secret or token in the file at name (already
// resolved against the config's directory), white space trimmed. When
// the file can be read, written or executed by its group or by others
// (UnprotectedMode), warning says so, naming the file as written and
// its mode, as ssh does for an "UNPROTECTED PRIVATE KEY FILE"; that is
// a warning and not an error, so that existing deployments keep
// working. err is the read's error, unchanged.
func ReadSecretFile(name, written string) (secret, warning string, err error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return "", "", err
	}
	if fi, serr := os.Stat(name); serr == nil && fi.Mode().Perm()&UnprotectedMode != 0 {
		warning = fmt.Sprintf("UNPROTECTED SECRET FILE %s: mode %04o lets group or others at it (chmod 600 %s)",
			written, fi.Mode().Perm(), written)
	}
	return strings.TrimSpace(string(data)), warning, nil
}
