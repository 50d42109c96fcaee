package yamlconf

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// fuzzError matches every line of an error about the file fuzz.yaml.
var fuzzError = regexp.MustCompile(`^fuzz\.yaml:[1-9][0-9]*:[1-9][0-9]*: [^\n]*$`)

// FuzzDecode checks that no text makes Decode panic (a decoder panic is
// recovered as an error), that each of its errors is one line beginning
// with FILE:LINE:COL, that every position it returns is inside the file,
// and that checking the decoded geo block and locations only ever gives
// positioned, one-line errors. The mmdb is not opened: the fuzzer must
// not wander the file system. The seed corpus is in testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("listen: [\":53\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c testConfig
		pos, err := Decode("fuzz.yaml", data, &c)
		if err != nil {
			if !fuzzError.MatchString(err.Error()) {
				t.Fatalf("error %q is not one line of FILE:LINE:COL: what", err)
			}
			return
		}
		// YAML breaks lines at \n, \r\n and a lone \r; counting \n and \r
		// apart is an upper bound.
		lines := strings.Count(string(data), "\n") + strings.Count(string(data), "\r") + 1
		for path, p := range pos {
			if p.Line < 1 || p.Column < 1 || p.Line > lines {
				t.Fatalf("position %v of %q is outside the file (%d lines)", p, path, lines)
			}
		}
		errs := NewErrors("fuzz.yaml", pos, "fuzz")
		c.Geo.MMDB = ""
		c.Geo.Check(errs, "geo", "")
		for i := range c.Members {
			c.Members[i].Location.Check(errs, fmt.Sprintf("members[%d].location", i), fmt.Sprintf("member %q", c.Members[i].Name))
		}
		if err := errs.Err(); err != nil {
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !fuzzError.MatchString(line) {
					t.Fatalf("check error line %q is not FILE:LINE:COL: what", line)
				}
			}
		}
	})
}
