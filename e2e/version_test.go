package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// versionRE is the shape of a -version line: the name, the module
// version, in parentheses what the build recorded of the commit, and the
// Go version.
var versionRE = regexp.MustCompile(`^([a-z]+) (\S+)(?: \(([^()]+)\))? (go1\.\S+)\n$`)

// vcsPieceRE is the shape of each piece in the parentheses: the commit
// (12 hex digits), its time, "modified".
var vcsPieceRE = regexp.MustCompile(`^(commit [0-9a-f]{12}|\d{4}-\d\d-\d\dT[0-9:.]+Z|modified)$`)

// builtRevision returns the commit that the binaries of this run record
// (vcs.revision): HEAD of the checkout they were built in, or "" when the
// tree is no git checkout or GOFLAGS turns the stamping off
// (-buildvcs=false), so that a missing revision is never taken for a
// right one.
func builtRevision(t *testing.T) string {
	t.Helper()
	flags, err := exec.Command("go", "env", "GOFLAGS").Output()
	if err != nil {
		t.Fatalf("go env GOFLAGS: %v", err)
	}
	if strings.Contains(string(flags), "-buildvcs=false") {
		t.Logf("GOFLAGS has -buildvcs=false: the binaries record no commit")
		return ""
	}
	cmd := exec.Command("git", "rev-parse", "HEAD")
	cmd.Dir = ".."
	head, err := cmd.Output()
	if err != nil {
		t.Logf("git rev-parse HEAD: %v: the binaries record no commit", err)
		return ""
	}
	return strings.TrimSpace(string(head))
}

// TestVersion runs every built binary with -version: each prints one
// line of the shared shape, naming itself and the commit it was built
// from, and exits 0.
func TestVersion(t *testing.T) {
	entries, err := os.ReadDir(binDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	for _, want := range []string{"dnsd", "groupctl", "groupsim", "mirror", "mkmmdb", "tmdemo"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s among the built binaries %v", want, names)
		}
	}
	rev := builtRevision(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin(name), "-version").Output()
			if err != nil {
				t.Fatalf("%s -version: %v (stdout %q)", name, err, out)
			}
			m := versionRE.FindStringSubmatch(string(out))
			if m == nil || m[1] != name {
				t.Fatalf("%s -version printed %q, want one line like %q", name, out, name+" v1.2.3 (commit 0123456789ab, 2026-12-04T21:00:00Z, modified) go1.26.8")
			}
			var pieces []string
			if m[3] != "" {
				pieces = strings.Split(m[3], ", ")
			}
			for _, p := range pieces {
				if !vcsPieceRE.MatchString(p) {
					t.Errorf("%s -version printed %q: %q is no commit, time or \"modified\"", name, out, p)
				}
			}
			if rev != "" && (len(pieces) == 0 || pieces[0] != "commit "+rev[:12]) {
				t.Errorf("%s -version printed %q, want commit %s", name, out, rev[:12])
			}
		})
	}
}

// buildInfoLabelRE matches one label of a series.
var buildInfoLabelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// checkBuildInfo checks that the scrape text of daemon ("dnsd", "mirror")
// has transmirror_<daemon>_build_info at 1 with the labels version,
// revision and goversion, the revision that of rev (builtRevision), with
// "-modified" after it when the tree had changes.
func checkBuildInfo(t *testing.T, text, daemon, rev string) {
	t.Helper()
	prefix := "transmirror_" + daemon + "_build_info{"
	var series []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			series = append(series, line)
		}
	}
	if len(series) != 1 || !strings.HasSuffix(series[0], "} 1") {
		t.Fatalf("want one series %s...} 1, got %q", prefix, series)
	}
	labels := map[string]string{}
	for _, m := range buildInfoLabelRE.FindAllStringSubmatch(series[0], -1) {
		labels[m[1]] = m[2]
	}
	if len(labels) != 3 || labels["version"] == "" || !strings.HasPrefix(labels["goversion"], "go1.") {
		t.Errorf("%s: want the labels version, revision and goversion, got %v", series[0], labels)
	}
	if got := labels["revision"]; got != rev && (rev == "" || got != rev+"-modified") {
		t.Errorf("%s: revision %q, want %q (or with -modified)", series[0], got, rev)
	}
}
