package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/probetest"
)

// The alerting rules (docs/alerts.yml), their promtool unit tests
// (docs/alerts_test.yml), the scrape config that loads them
// (docs/prometheus.yml) and their runbook (docs/runbook.md).
var (
	alertsFile     = filepath.Join("docs", "alerts.yml")
	alertTestsFile = filepath.Join("docs", "alerts_test.yml")
	promConfigFile = filepath.Join("docs", "prometheus.yml")
	runbookFile    = filepath.Join("docs", "runbook.md")
)

// alertRule is one rule of docs/alerts.yml.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// readAlertRules reads every rule of docs/alerts.yml (the repository's
// root is the parent of e2e/).
func readAlertRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, alertsFile, &f)
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) < 20 {
		t.Fatalf("%s: only %d rules (is the parser reading its groups?)", alertsFile, len(rules))
	}
	return rules
}

// readYAML decodes the file at path (from the repository's root) into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// needPromtool returns the path of promtool, or fails the test: the rules
// are not checked without it.
func needPromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not installed: apt-get install prometheus (Debian's package ships it; make deps installs it with promtool:prometheus in TEST_DEPS): %v", err)
	}
	return p
}

// promtool runs promtool with args in the repository's root and returns
// what it printed; a non-zero exit fails the test with that output.
func promtool(t *testing.T, path string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case,
// spaces to hyphens, other punctuation dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		case r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// runbookAnchors returns the anchors of the headings of docs/runbook.md.
func runbookAnchors(t *testing.T) (map[string]bool, string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", runbookFile))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	inCode := false
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if !inCode && strings.HasPrefix(line, "#") {
			anchors[githubAnchor(strings.TrimLeft(line, "#"))] = true
		}
	}
	return anchors, string(data)
}

// TestAlertsPromtool checks the rules with promtool (syntax, and the unit
// tests in which every alert fires), that the scrape config loads them,
// and that every alert is complete: a for, a severity, a summary and a
// description, and a runbook_url that is a section of docs/runbook.md.
func TestAlertsPromtool(t *testing.T) {
	pt := needPromtool(t)
	rules := readAlertRules(t)

	t.Run("check rules", func(t *testing.T) {
		out := promtool(t, pt, "check", "rules", alertsFile)
		if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules)); !strings.Contains(out, want) {
			t.Errorf("promtool check rules says %q, want %q", out, want)
		}
	})
	t.Run("test rules", func(t *testing.T) {
		out := promtool(t, pt, "test", "rules", alertTestsFile)
		if !strings.Contains(out, "SUCCESS") {
			t.Errorf("promtool test rules: %s", out)
		}
	})
	t.Run("every alert fires in the unit tests", func(t *testing.T) {
		var f struct {
			RuleFiles []string `yaml:"rule_files"`
			Tests     []struct {
				AlertRuleTest []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		readYAML(t, alertTestsFile, &f)
		if !slices.Equal(f.RuleFiles, []string{filepath.Base(alertsFile)}) {
			t.Errorf("%s: rule_files %v, want [%s]", alertTestsFile, f.RuleFiles, filepath.Base(alertsFile))
		}
		fired, quiet := map[string]bool{}, map[string]bool{}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fired[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
		for _, r := range rules {
			if !fired[r.Alert] {
				t.Errorf("%s: no test of %s makes %s fire", alertTestsFile, alertsFile, r.Alert)
			}
		}
		for name := range fired {
			if !slices.ContainsFunc(rules, func(r alertRule) bool { return r.Alert == name }) {
				t.Errorf("%s tests %s, which %s does not have", alertTestsFile, name, alertsFile)
			}
		}
		t.Logf("%d alerts fire in the unit tests; %d are also checked quiet at some time", len(fired), len(quiet))
	})
	t.Run("prometheus.yml loads the rules", func(t *testing.T) {
		var c struct {
			RuleFiles []string `yaml:"rule_files"`
		}
		readYAML(t, promConfigFile, &c)
		if !slices.Contains(c.RuleFiles, filepath.Base(alertsFile)) {
			t.Errorf("%s: rule_files %v does not load %s", promConfigFile, c.RuleFiles, filepath.Base(alertsFile))
		}
		promtool(t, pt, "check", "config", promConfigFile)
	})
	t.Run("every alert is complete", func(t *testing.T) {
		anchors, _ := runbookAnchors(t)
		seen := map[string]bool{}
		for _, r := range rules {
			if seen[r.Alert] {
				t.Errorf("%s: alert %s twice", alertsFile, r.Alert)
			}
			seen[r.Alert] = true
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
			}
			if s := r.Labels["severity"]; s != "page" && s != "warn" {
				t.Errorf("%s: severity %q, want page or warn", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s", r.Alert, a)
				}
			}
			want := filepath.ToSlash(runbookFile) + "#" + strings.ToLower(r.Alert)
			if got := r.Annotations["runbook_url"]; got != want {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, want)
			}
			if !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("%s has no section %s", runbookFile, r.Alert)
			}
		}
	})
	t.Run("runbook links", func(t *testing.T) {
		anchors, text := runbookAnchors(t)
		for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") {
				continue
			}
			file, anchor, _ := strings.Cut(link, "#")
			if file == "" {
				if !anchors[anchor] {
					t.Errorf("%s links #%s, which is no heading of it", runbookFile, anchor)
				}
				continue
			}
			if _, err := os.Stat(filepath.Join("..", filepath.Dir(runbookFile), filepath.FromSlash(file))); err != nil {
				t.Errorf("%s links %s: %v", runbookFile, link, err)
			}
		}
		readme, err := os.ReadFile(filepath.Join("..", "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), "](docs/runbook.md)") {
			t.Error("README.md does not link docs/runbook.md")
		}
	})
}

// alertMetricRE finds the metric names of an expression once its string
// literals are removed; stringRE finds those.
var (
	alertMetricRE = regexp.MustCompile(`\btransmirror_[a-z0-9_]+|\bup\b`)
	stringRE      = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	selectorRE    = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcherRE     = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
)

// alertMatcher is one label matcher of a rule's selector: name{label op "value"}.
type alertMatcher struct {
	metric, label, op, value string
}

// alertNames returns the metric names the expression uses.
func alertNames(expr string) []string {
	var names []string
	for _, n := range alertMetricRE.FindAllString(stringRE.ReplaceAllString(expr, `""`), -1) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// alertMatchers returns the label matchers of the expression's selectors;
// a regular expression's alternatives (a|b) each as one.
func alertMatchers(expr string) []alertMatcher {
	var out []alertMatcher
	for _, s := range selectorRE.FindAllStringSubmatch(expr, -1) {
		for _, m := range matcherRE.FindAllStringSubmatch(s[2], -1) {
			values := []string{m[3]}
			if m[2] == "=~" || m[2] == "!~" {
				values = strings.Split(m[3], "|")
			}
			for _, v := range values {
				out = append(out, alertMatcher{metric: s[1], label: m[1], op: m[2], value: v})
			}
		}
	}
	return out
}

func TestAlertsExprParsing(t *testing.T) {
	expr := `sum by (job) (rate(transmirror_a_total{result!~"ok|up"}[5m])) / up{job="x"} unless transmirror_b_up == 1`
	if got, want := alertNames(expr), []string{"transmirror_a_total", "up", "transmirror_b_up"}; !slices.Equal(got, want) {
		t.Errorf("alertNames = %v, want %v", got, want)
	}
	got := alertMatchers(expr)
	want := []alertMatcher{{"transmirror_a_total", "result", "!~", "ok"}, {"transmirror_a_total", "result", "!~", "up"}, {"up", "job", "=", "x"}}
	if !slices.Equal(got, want) {
		t.Errorf("alertMatchers = %v, want %v", got, want)
	}
}

// seriesWith reports whether the scrape text has a series of metric with
// label="value".
func seriesWith(text, metric, label, value string) bool {
	want := label + "=" + fmt.Sprintf("%q", value)
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		if end := strings.LastIndexByte(rest, '}'); end >= 0 && strings.Contains(","+rest[:end]+",", ","+want+",") {
			return true
		}
	}
	return false
}

// eventLabel is a label value of a metric that shows only with an event.
type eventLabel struct {
	metric, label, value string
	why                  string      // why the test's stack does not show it
	named                func() bool // whether the daemon names the value so
}

// labelsOnEvent are label values the rules match that a scrape of the
// test's stack does not show, because the daemon makes the series only
// when the event happens, with why that is and a check that the daemon
// names the value so.
var labelsOnEvent = []eventLabel{
	{
		"transmirror_dnsd_queries_total", "rcode", "SERVFAIL",
		"a series per rcode answered, and dnsd answers no SERVFAIL unless something is broken; its rcode label is miekg/dns's name of the rcode (dnsd's rcodeLabel)",
		func() bool { return dns.RcodeToString[dns.RcodeServerFailure] == "SERVFAIL" },
	},
}

// TestAlertsMetrics starts a real dnsd (one node of an NS set with quorum
// on, over a real etcd) with a group of two members — fra1, a real mirror
// that pushes its load and serves HTTPS, a content index and a trace file,
// and clk1, a load report server whose clock is two hours behind — and a
// real site front end over fra1; it sends a query and scrapes the three
// daemons until every metric that an expression of docs/alerts.yml names
// is exposed, and every label value it matches is among the series (but
// those of labelsOnEvent). up is Prometheus's own: its job values must be
// the scrape jobs of docs/prometheus.yml.
//
// Some of the metrics come only with the event the alert is about, which
// the stack makes happen: transmirror_probe_retimed_reports_total (clk1's
// reports are retimed), transmirror_dnsd_master_errors_total (the group's
// master answers 404), transmirror_mirror_acme_orders_total (fra1's ACME
// CA does not speak TLS: its orders fail) and
// transmirror_dnsd_queries_total (the test's query).
func TestAlertsMetrics(t *testing.T) {
	const (
		secret = "e2e-group-secret"
		group  = "www.example.test."
	)
	rules := readAlertRules(t)
	etcd := etcdtest.Start(t)
	dir := t.TempDir()

	// clk1's load reports, two hours behind dnsd's clock; and the group's
	// master, which has no trace.
	var seq atomic.Uint64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/load" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(probe.Report{Group: group, Member: "clk1", Seq: seq.Add(1),
			Time: time.Now().Add(-2 * time.Hour), Capacity: 1000})
	}))
	t.Cleanup(fake.Close)

	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "example.test.zone", string(zone))
	d := startDNSD(t, true, "-config", writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
state_file: state.json
server: {identity: ns1.example.test, nsid: ns1}
health: {interval: 300ms, timeout: 250ms, jitter: 30ms, rise: 1, fall: 2}
cluster:
  node: ns1
  etcd: {endpoints: ["%s"], prefix: /e2e-alerts/, request_timeout: 2s, dial_timeout: 3s, lease_ttl: 3s}
  quorum: {enabled: true}
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s
    ttl: {min: 5, max: 10}
    answers: 2
    secret: %s
    max_lag: 1h
    master: %s/master
    members:
      - {name: fra1, host: fra1.mirrors.example.test., addresses: [127.0.1.1], capacity: 1000}
      - {name: clk1, host: clk1.mirrors.example.test., addresses: [127.0.4.1], capacity: 1000, probe: "%s/v1/load"}
`, etcd.Endpoint(), group, secret, fake.URL, fake.URL)))

	// fra1: HTTPS with a certificate from a test CA and one from an ACME
	// "CA" that answers plain HTTP (every order fails), a content index
	// and a trace file.
	root := filepath.Join(dir, "fra1-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "trace", time.Now().UTC().Format(time.RFC3339)+"\n")
	ca := probetest.NewCA(t, dir, "ca")
	crt, key := ca.LeafFor(t, dir, "fra1", "www.example.test", "fra1.mirrors.example.test")
	fra1 := startMirror(t, dir, "fra1", d.Admin, secret, fmt.Sprintf(`content: {index: true, trace: trace}
tls:
  listen: ["127.0.0.1:0"]
  certificates: [{cert_file: %q, key_file: %q}]
  acme: {directory: "https://%s/dir", dir: acme, challenge: http-01}
`, crt, key, strings.TrimPrefix(fake.URL, "http://")))

	fe := runMirror(t, writeFile(t, dir, "fe.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: fe
host: fe.site.example.test
capacity: 1000
run_queue: none
redirect: {enabled: false}
backends:
  - {name: be-fra1, url: "http://%s"}
site:
  health: {interval: 200ms, path: /hello.txt}
`, fra1.HTTP)), "fe")

	daemons := []struct{ name, admin string }{{"dnsd", d.Admin}, {"mirror fra1", fra1.Admin}, {"front end", fe.Admin}}
	type use struct{ alert, name string }
	var uses []use
	var matchers []alertMatcher
	for _, r := range rules {
		for _, n := range alertNames(r.Expr) {
			uses = append(uses, use{r.Alert, n})
		}
		matchers = append(matchers, alertMatchers(r.Expr)...)
	}

	t.Run("up's jobs are scrape jobs", func(t *testing.T) {
		var c struct {
			ScrapeConfigs []struct {
				JobName string `yaml:"job_name"`
			} `yaml:"scrape_configs"`
		}
		readYAML(t, promConfigFile, &c)
		var jobs []string
		for _, s := range c.ScrapeConfigs {
			jobs = append(jobs, s.JobName)
		}
		n := 0
		for _, m := range matchers {
			if m.label != "job" {
				continue
			}
			n++
			if !slices.Contains(jobs, m.value) {
				t.Errorf("%s{job%s%q}: no such job in %s (%v)", m.metric, m.op, m.value, promConfigFile, jobs)
			}
		}
		if n == 0 {
			t.Errorf("no rule of %s matches a job: the up alerts are gone?", alertsFile)
		}
	})

	t.Run("every metric is exposed", func(t *testing.T) {
		var text string
		types := map[string]string{}
		probetest.Until(t, 30*time.Second, func() string {
			m := new(dns.Msg)
			m.SetQuestion("www.example.test.", dns.TypeA)
			if _, _, err := new(dns.Client).Exchange(m, d.Addr); err != nil {
				return "dns query: " + err.Error()
			}
			var all strings.Builder
			for _, dm := range daemons {
				s, err := metrics(dm.admin)
				if err != nil {
					return dm.name + ": " + err.Error()
				}
				all.WriteString(s)
				for k, v := range scrapeTypes(s) {
					types[k] = v
				}
			}
			text = all.String()
			var missing []string
			for _, u := range uses {
				if u.name != "up" && !metricKnown(types, u.name) {
					missing = append(missing, u.alert+": "+u.name)
				}
			}
			if len(missing) > 0 {
				return fmt.Sprintf("metrics that %s uses but no daemon exposes: %v", alertsFile, missing)
			}
			return ""
		})
		for _, u := range uses {
			t.Logf("%s uses %s (%s)", u.alert, u.name, types[u.name])
		}

		t.Run("label values", func(t *testing.T) {
			for _, m := range matchers {
				if m.metric == "up" || m.label == "job" || m.label == "instance" {
					continue // Prometheus's labels, checked above
				}
				i := slices.IndexFunc(labelsOnEvent, func(e eventLabel) bool {
					return e.metric == m.metric && e.label == m.label && e.value == m.value
				})
				if i >= 0 {
					e := labelsOnEvent[i]
					if !e.named() {
						t.Errorf("%s{%s=%q}: the daemon does not name it so", m.metric, m.label, m.value)
					}
					t.Logf("%s{%s=%q} is not in the scrapes: %s", m.metric, m.label, m.value, e.why)
					continue
				}
				if !seriesWith(text, m.metric, m.label, m.value) {
					t.Errorf("%s matches %s{%s%s%q}, but no series has %s=%q", alertsFile, m.metric, m.label, m.op, m.value, m.label, m.value)
				}
			}
		})
	})
}
