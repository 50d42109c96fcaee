package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/transmirror/transmirror/probe/probetest"
)

// grafanaMetricRE finds the metric names in a PromQL expression.
var grafanaMetricRE = regexp.MustCompile(`transmirror_[a-z0-9_]+`)

// grafanaExprs returns every PromQL expression of the Grafana dashboard
// JSON (panel targets, template variables, annotations), wherever it sits.
func grafanaExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && (k == "expr" || k == "query" || k == "definition") {
					out = append(out, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)
	return out
}

// scrapeTypes reads the "# TYPE name type" lines of a /metrics scrape.
func scrapeTypes(text string) map[string]string {
	types := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
		}
	}
	return types
}

// metricKnown reports whether name (as written in PromQL) is exposed:
// itself, or a histogram's or summary's _bucket, _sum or _count series.
func metricKnown(types map[string]string, name string) bool {
	if _, ok := types[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if typ := types[base]; typ == "histogram" || (typ == "summary" && suffix != "_bucket") {
			return true
		}
	}
	return false
}

// TestMetricsGrafana starts the real dnsd with three real mirrors and a
// real front-end mirror over two of them, sends DNS and HTTP traffic, stops
// the third mirror (so that probes fail), and checks that every metric the Grafana dashboard
// uses is in a scrape of the running daemons, that each scrape passes
// promlint, and that each daemon exports its build_info.
func TestMetricsGrafana(t *testing.T) {
	s := startDashStack(t, "")
	dir := t.TempDir()
	fe := &dashMirror{Name: "fe"}
	fePath := writeFile(t, dir, "fe.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test.
member: fe
host: fe.site.example.test
capacity: 1000
redirect: {enabled: false}
backends:
  - {name: be-fra1, url: "http://%s"}
  - {name: be-nyc1, url: "http://%s"}
site:
  health: {interval: 200ms, path: /index.html}
`, s.Mirrors[0].HTTP, s.Mirrors[1].HTTP))
	fe.proc = start(t, bin("mirror"), []string{"-config", fePath}, func(line string) bool {
		if x := dashHTTPRE.FindStringSubmatch(line); x != nil && fe.HTTP == "" {
			fe.HTTP = x[1]
		}
		if x := adminAddrRE.FindStringSubmatch(line); x != nil {
			fe.Admin = x[1]
		}
		return strings.Contains(line, `msg="mirror started"`)
	})
	s.traffic(t)
	s.Mirrors[2].Stop() // sin1: its probes fail from now on
	daemons := map[string]string{"dnsd": s.DNSD.Admin, "front end": fe.Admin}
	for _, m := range s.Mirrors[:2] {
		daemons["mirror "+m.Name] = m.Admin
	}
	// Requests through the front end, so that it picks back ends.
	hc := &http.Client{Timeout: 5 * time.Second}
	probetest.Until(t, 20*time.Second, func() string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+fe.HTTP+"/index.html", nil)
		req.Host = "www.example.test"
		resp, err := hc.Do(req)
		if err != nil {
			return err.Error()
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if !strings.Contains(scrape(t, fe.Admin), "transmirror_mirror_backend_picks_total{") {
			return "front end: no back-end pick counted yet"
		}
		return ""
	})

	exprs := grafanaExprs(t, filepath.Join("..", "docs", "grafana", "transmirror.json"))
	var names []string
	for _, e := range exprs {
		for _, n := range grafanaMetricRE.FindAllString(e, -1) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	if len(names) < 20 {
		t.Fatalf("the Grafana dashboard names only %d metrics: %v (is the parser finding its exprs?)", len(names), names)
	}

	// Poll until every name is there: a counter vector shows once it
	// counted something, and the traffic needs a moment.
	var types map[string]string
	probetest.Until(t, 30*time.Second, func() string {
		types = map[string]string{}
		for _, addr := range daemons {
			for k, v := range scrapeTypes(scrape(t, addr)) {
				types[k] = v
			}
		}
		var missing []string
		for _, n := range names {
			if !metricKnown(types, n) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("metrics used by docs/grafana/transmirror.json but not exposed: %v", missing)
		}
		return ""
	})
	for _, n := range names {
		t.Logf("grafana uses %s", n)
	}

	for name, addr := range daemons {
		t.Run("promlint "+name, func(t *testing.T) {
			problems, err := promlint.New(strings.NewReader(scrape(t, addr))).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("%s: %s", p.Metric, p.Text)
			}
		})
	}
	t.Run("member gauges", func(t *testing.T) {
		text := scrape(t, s.DNSD.Admin)
		for _, m := range dashMembers {
			for _, want := range []string{
				`transmirror_dnsd_member_up{group="www.example.test.",member="` + m.name + `"}`,
				`transmirror_dnsd_member_utilization_ratio{group="www.example.test.",member="` + m.name + `"}`,
			} {
				if !strings.Contains(text, want) {
					t.Errorf("scrape lacks %s", want)
				}
			}
		}
	})
	t.Run("build info", func(t *testing.T) {
		rev := builtRevision(t)
		for name, addr := range daemons {
			daemon := "mirror"
			if name == "dnsd" {
				daemon = "dnsd"
			}
			checkBuildInfo(t, scrape(t, addr), daemon, rev)
		}
	})
}

func TestMetricKnown(t *testing.T) {
	types := map[string]string{"a_seconds": "histogram", "b_total": "counter", "c": "summary"}
	tests := []struct {
		name string
		want bool
	}{
		{"a_seconds", true}, {"a_seconds_bucket", true}, {"a_seconds_sum", true}, {"a_seconds_count", true},
		{"b_total", true}, {"b_total_count", false}, {"c_sum", true}, {"c_bucket", false}, {"d", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := metricKnown(types, tt.name); got != tt.want {
				t.Errorf("metricKnown(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}
