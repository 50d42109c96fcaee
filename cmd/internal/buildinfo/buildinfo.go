// Package buildinfo says what a binary's Go build info records about its
// build, in the two forms the commands give it: the one line that every
// command prints for -version, and the transmirror_<daemon>_build_info
// gauge of each daemon. Everything comes from runtime/debug's BuildInfo:
// the main module's version, the settings vcs.revision, vcs.time and
// vcs.modified that go build stamps in a checkout, and the Go version.
package buildinfo

import (
	"flag"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// revisionDigits is how many hex digits of vcs.revision the -version line
// shows (the build_info gauge has all of them).
const revisionDigits = 12

// flagUsage is the usage text of every command's -version flag.
const flagUsage = "print the version (module version, commit, commit time, Go version) on one line and exit"

// Flag declares -version on fs, stored in p.
func Flag(fs *flag.FlagSet, p *bool) { fs.BoolVar(p, "version", false, flagUsage) }

// info is what a BuildInfo records about a build; a field the build did
// not record is empty.
type info struct {
	version   string // the main module's version: a tag, a pseudo-version or "(devel)"
	revision  string // vcs.revision, in full
	time      string // vcs.time, the commit's time in RFC 3339
	modified  bool   // vcs.modified: the tree had uncommitted changes
	goVersion string
}

// read reads bi; nil reads as an empty info.
func read(bi *debug.BuildInfo) info {
	if bi == nil {
		return info{}
	}
	i := info{version: bi.Main.Version, goVersion: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.revision = s.Value
		case "vcs.time":
			i.time = s.Value
		case "vcs.modified":
			i.modified = s.Value == "true"
		}
	}
	return i
}

// Line returns the -version line of the command name built as bi says,
// without a newline:
//
//	dnsd v1.2.3 (commit 0123456789ab, 2026-12-04T21:00:00Z, modified) go1.26.8
//
// The version is the main module's as recorded ("(devel)", a tag or a
// pseudo-version), the commit is vcs.revision cut to 12 hex digits, the
// time is vcs.time, "modified" is there when vcs.modified is true, and the
// last word is the Go version. A piece that bi does not record is left
// out, and the parentheses with it when they would be empty; a nil bi
// gives the name alone.
func Line(name string, bi *debug.BuildInfo) string {
	i := read(bi)
	var vcs []string
	if i.revision != "" {
		vcs = append(vcs, "commit "+i.revision[:min(len(i.revision), revisionDigits)])
	}
	if i.time != "" {
		vcs = append(vcs, i.time)
	}
	if i.modified {
		vcs = append(vcs, "modified")
	}
	words := []string{name}
	if i.version != "" {
		words = append(words, i.version)
	}
	if len(vcs) > 0 {
		words = append(words, "("+strings.Join(vcs, ", ")+")")
	}
	if i.goVersion != "" {
		words = append(words, i.goVersion)
	}
	return strings.Join(words, " ")
}

// running returns the build info of the running binary; a binary built
// without module support has none but its Go version.
func running() *debug.BuildInfo {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi
	}
	return &debug.BuildInfo{GoVersion: runtime.Version()}
}

// Version returns the -version line (see Line) of the running binary,
// called name.
func Version(name string) string { return Line(name, running()) }

// NewGauge returns transmirror_<daemon>_build_info for a daemon built as bi
// says: 1, with the labels version (the main module's version), revision
// (vcs.revision in full, with "-modified" after it when vcs.modified is
// true, as prometheus/common/version has it) and goversion. A label that bi
// does not record is empty.
func NewGauge(daemon string, bi *debug.BuildInfo) prometheus.Gauge {
	i := read(bi)
	revision := i.revision
	if i.modified && revision != "" {
		revision += "-modified"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: daemon, Name: "build_info",
		Help:        "A metric with a constant '1' value labeled by version, revision and goversion from which " + daemon + " was built.",
		ConstLabels: prometheus.Labels{"version": i.version, "revision": revision, "goversion": i.goVersion},
	})
	g.Set(1)
	return g
}

// Collector returns the build_info gauge (see NewGauge) of the running
// binary, the daemon called daemon ("dnsd", "mirror").
func Collector(daemon string) prometheus.Collector { return NewGauge(daemon, running()) }
