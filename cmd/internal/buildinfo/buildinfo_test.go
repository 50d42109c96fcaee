package buildinfo

import (
	"flag"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// build returns a BuildInfo of module version version, Go go1.26.8 and the
// settings given as key, value pairs.
func build(version string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/transmirror/transmirror", Version: version}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

const (
	rev     = "0123456789abcdef0123456789abcdef01234567"
	revTime = "2026-12-04T21:00:00Z"
)

func TestLine(t *testing.T) {
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"tagged, clean", build("v1.2.3", "vcs.revision", rev, "vcs.time", revTime, "vcs.modified", "false"),
			"dnsd v1.2.3 (commit 0123456789ab, 2026-12-04T21:00:00Z) go1.26.8"},
		{"modified", build("v1.2.3", "vcs.revision", rev, "vcs.time", revTime, "vcs.modified", "true"),
			"dnsd v1.2.3 (commit 0123456789ab, 2026-12-04T21:00:00Z, modified) go1.26.8"},
		{"devel as it is", build("(devel)", "vcs.revision", rev, "vcs.time", revTime),
			"dnsd (devel) (commit 0123456789ab, 2026-12-04T21:00:00Z) go1.26.8"},
		{"pseudo-version", build("v0.0.0-20261204210000-0123456789ab+dirty", "vcs", "git", "vcs.revision", rev, "vcs.time", revTime, "vcs.modified", "true"),
			"dnsd v0.0.0-20261204210000-0123456789ab+dirty (commit 0123456789ab, 2026-12-04T21:00:00Z, modified) go1.26.8"},
		{"short revision kept whole", build("v1.2.3", "vcs.revision", "abc123"),
			"dnsd v1.2.3 (commit abc123) go1.26.8"},
		{"time only", build("v1.2.3", "vcs.time", revTime),
			"dnsd v1.2.3 (2026-12-04T21:00:00Z) go1.26.8"},
		{"no vcs settings", build("(devel)", "-compiler", "gc", "GOOS", "linux"),
			"dnsd (devel) go1.26.8"},
		{"no version", build("", "vcs.revision", rev),
			"dnsd (commit 0123456789ab) go1.26.8"},
		{"no go version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}},
			"dnsd v1.2.3"},
		{"nil", nil, "dnsd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Line("dnsd", tt.bi); got != tt.want {
				t.Errorf("Line = %q\nwant   %q", got, tt.want)
			}
		})
	}
}

// TestVersion: the running binary's line names it and ends with the Go
// version it runs on.
func TestVersion(t *testing.T) {
	got := Version("mirror")
	if !strings.HasPrefix(got, "mirror") || !strings.HasSuffix(got, " "+runtime.Version()) || strings.Contains(got, "\n") {
		t.Errorf("Version = %q", got)
	}
}

func TestFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want bool
	}{
		{"absent", nil, false},
		{"given", []string{"-version"}, true},
		{"double dash", []string{"--version"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var v bool
			Flag(fs, &v)
			if err := fs.Parse(tt.args); err != nil || v != tt.want {
				t.Errorf("parse %q: %v, -version %v, want %v", tt.args, err, v, tt.want)
			}
		})
	}
}

func TestNewGauge(t *testing.T) {
	tests := []struct {
		name   string
		daemon string
		bi     *debug.BuildInfo
		want   string // the series in the exposition format
	}{
		{"clean", "dnsd", build("v1.2.3", "vcs.revision", rev, "vcs.modified", "false"),
			`transmirror_dnsd_build_info{goversion="go1.26.8",revision="` + rev + `",version="v1.2.3"} 1`},
		{"modified", "mirror", build("(devel)", "vcs.revision", rev, "vcs.modified", "true"),
			`transmirror_mirror_build_info{goversion="go1.26.8",revision="` + rev + `-modified",version="(devel)"} 1`},
		{"no vcs", "mirror", build("(devel)", "vcs.modified", "true"),
			`transmirror_mirror_build_info{goversion="go1.26.8",revision="",version="(devel)"} 1`},
		{"nil", "dnsd", nil,
			`transmirror_dnsd_build_info{goversion="",revision="",version=""} 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			if err := reg.Register(NewGauge(tt.daemon, tt.bi)); err != nil {
				t.Fatal(err)
			}
			name := "transmirror_" + tt.daemon + "_build_info"
			want := "# HELP " + name + " A metric with a constant '1' value labeled by version, revision and goversion from which " +
				tt.daemon + " was built.\n# TYPE " + name + " gauge\n" + tt.want + "\n"
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), name); err != nil {
				t.Error(err)
			}
			problems, err := testutil.GatherAndLint(reg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
		})
	}
}

// TestCollector: the running binary's gauge registers beside the Go and
// process collectors, is 1 and passes promlint.
func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := reg.Register(Collector("dnsd")); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "transmirror_dnsd_build_info" })
	if i < 0 || len(mfs[i].GetMetric()) != 1 || mfs[i].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("no transmirror_dnsd_build_info 1 in %v", mfs)
	}
	labels := map[string]string{}
	for _, l := range mfs[i].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if len(labels) != 3 || labels["goversion"] != runtime.Version() {
		t.Errorf("labels %v, want version, revision and goversion %s", labels, runtime.Version())
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}
