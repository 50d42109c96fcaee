package mirror

import (
	"regexp"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/zones/yamlconf"
)

// fuzzConfigError matches every line of an error about fuzz.yaml.
var fuzzConfigError = regexp.MustCompile(`^fuzz\.yaml:[1-9][0-9]*:[1-9][0-9]*: [^\n]*$`)

// FuzzParseConfig checks that no config text makes the mirror's config
// decoding or validation panic, and that every line of their errors is
// positioned ("FILE:LINE:COL: what"). Files named in the config are not
// read: root becomes the package directory, the file of dnsd.secret and geo.mmdb
// are dropped, so that the fuzzer does not wander the file system. The
// seed corpus is in testdata/fuzz/FuzzParseConfig.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("listen: [':80']\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\nroot: .\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, pos, err := decodeConfig("fuzz.yaml", data)
		if err != nil {
			if !fuzzConfigError.MatchString(err.Error()) {
				t.Fatalf("decode error %q is not one line of FILE:LINE:COL: what", err)
			}
			return
		}
		if cfg.Root != "" {
			cfg.Root = "."
		}
		if cfg.DNSD.SecretSource.File != "" {
			cfg.DNSD.SecretSource = yamlconf.Secret{}
		}
		cfg.Geo.MMDB = ""
		if err := validateConfig(cfg, pos); err != nil {
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !fuzzConfigError.MatchString(line) {
					t.Fatalf("error line %q is not FILE:LINE:COL: what, in\n%v", line, err)
				}
			}
		}
	})
}
