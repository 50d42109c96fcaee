package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/zones"
)

// The layout that the units in docs/systemd install into (the Debian
// packages'; docs/operating.md "Installing: units, paths and state").
const (
	unitBinDir    = "/usr/bin"
	unitConfigDir = "/etc/transmirror"
	unitUser      = "transmirror"
	// unitStopMargin is what TimeoutStopSec allows beyond the longest stop
	// that a config can take (mirrorStopBound).
	unitStopMargin = 10 * time.Second
	// leaveAttempts is group.leaveAttempts (not exported): how many times
	// a leave sends its drain, and its GROUP-EXIT, to one dnsd.
	leaveAttempts = 3
)

// unitHardening are the directives, with their values, that every unit
// keeps.
var unitHardening = map[string]string{
	"Service.NoNewPrivileges":       "yes",
	"Service.ProtectSystem":         "strict",
	"Service.ProtectHome":           "yes",
	"Service.PrivateTmp":            "yes",
	"Service.PrivateDevices":        "yes",
	"Service.ProtectKernelTunables": "yes",
	"Service.ProtectControlGroups":  "yes",
}

// unitHidden are the directories that the hardening hides from the
// daemons (ProtectHome, PrivateTmp): nothing they read may be there.
var unitHidden = []string{"/home", "/root", "/run/user", "/tmp", "/var/tmp"}

// unitCase is one unit of docs/systemd: the binary it runs and the config
// file it gives it, in unitConfigDir. Its examples are the configs of
// docs/examples that install as that file (named as in TestDocExamples:
// mirror*.yaml for the mirror, the others for dnsd).
type unitCase struct {
	file   string
	binary string
	config string
}

var unitCases = []unitCase{
	{file: "transmirror-dnsd.service", binary: "dnsd", config: "dnsd.yaml"},
	{file: "transmirror-mirror.service", binary: "mirror", config: "mirror.yaml"},
}

// unitFile is a systemd unit file as "Section.Key" → its values in order
// (a key may be given more than once; an empty assignment resets it, as
// systemd reads it).
type unitFile struct {
	name string
	keys map[string][]string
}

// parseUnit reads the unit file text: [Section] lines, Key=Value lines,
// comments (# or ;) and lines continued by a final backslash.
func parseUnit(name, text string) (*unitFile, error) {
	u := &unitFile{name: name, keys: make(map[string][]string)}
	section, pending := "", ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line, pending = pending+" "+line, ""
		} else if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if l, ok := strings.CutSuffix(line, `\`); ok {
			pending = strings.TrimSpace(l)
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			return nil, fmt.Errorf("%s:%d: not a [Section] or a Key=Value line: %q", name, n, line)
		}
		key := section + "." + strings.TrimSpace(k)
		if v = strings.TrimSpace(v); v == "" {
			delete(u.keys, key)
			continue
		}
		u.keys[key] = append(u.keys[key], v)
	}
	return u, sc.Err()
}

// get returns the value of key, or "" with a problem added to probs when
// the key is not given exactly once.
func (u *unitFile) get(key string, probs *[]string) string {
	switch v := u.keys[key]; len(v) {
	case 1:
		return v[0]
	case 0:
		*probs = append(*probs, fmt.Sprintf("%s: no %s", u.name, key))
	default:
		*probs = append(*probs, fmt.Sprintf("%s: %s given %d times: %q", u.name, key, len(v), v))
	}
	return ""
}

// paths returns the paths of a list-valued key (ReadOnlyPaths=…), without
// the "-" and "+" prefixes.
func (u *unitFile) paths(key string) []string {
	var out []string
	for _, v := range u.keys[key] {
		for _, f := range strings.Fields(v) {
			out = append(out, path.Clean(strings.TrimLeft(f, "-+")))
		}
	}
	return out
}

// stateDir is where the unit may write: /var/lib/ + StateDirectory.
func (u *unitFile) stateDir() string {
	if v := u.keys["Service.StateDirectory"]; len(v) == 1 && !strings.ContainsAny(v[0], " /") {
		return path.Join("/var/lib", v[0])
	}
	return "" // unitProblems says why
}

// parseTimespan parses a systemd time span as TimeoutStopSec takes it: a
// bare number of seconds, or values with units ("390s", "6min 30s").
func parseTimespan(s string) (time.Duration, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	r := strings.NewReplacer(" ", "", "min", "m", "sec", "s", "hr", "h")
	return time.ParseDuration(r.Replace(s))
}

// unitProblems checks the directives of u, the unit of c: the binaries in
// unitBinDir, -check before the start, the config in unitConfigDir, SIGHUP
// for reload, the user, the state directory as the only writable place,
// and the hardening.
func unitProblems(u *unitFile, c unitCase) []string {
	var probs []string
	binary, config := path.Join(unitBinDir, c.binary), path.Join(unitConfigDir, c.config)
	for _, key := range []string{"Service.ExecStartPre", "Service.ExecStart"} {
		f := strings.Fields(u.get(key, &probs))
		if len(f) == 0 {
			continue
		}
		if f[0] != binary {
			probs = append(probs, fmt.Sprintf("%s: %s runs %s, want %s", u.name, key, f[0], binary))
		}
		if i := slices.Index(f, "-config"); i < 0 || i+1 == len(f) || f[i+1] != config {
			probs = append(probs, fmt.Sprintf("%s: %s: want -config %s in %q", u.name, key, config, f))
		}
		if check := slices.Contains(f, "-check"); check != (key == "Service.ExecStartPre") {
			probs = append(probs, fmt.Sprintf("%s: %s: -check %v, want it in ExecStartPre only", u.name, key, check))
		}
	}
	if f := strings.Fields(u.get("Service.ExecReload", &probs)); len(f) > 0 &&
		!(path.Base(f[0]) == "kill" && (slices.Contains(f, "-HUP") || slices.Contains(f, "-SIGHUP")) && f[len(f)-1] == "$MAINPID") {
		probs = append(probs, fmt.Sprintf("%s: ExecReload %q: want kill -HUP $MAINPID", u.name, f))
	}
	for _, key := range []string{"Service.User", "Service.Group"} {
		if v := u.get(key, &probs); v != "" && v != unitUser {
			probs = append(probs, fmt.Sprintf("%s: %s=%s, want %s", u.name, key, v, unitUser))
		}
	}
	if v := u.get("Service.StateDirectory", &probs); v != "" && v != unitUser {
		probs = append(probs, fmt.Sprintf("%s: StateDirectory=%s, want %s", u.name, v, unitUser))
	}
	for _, p := range u.paths("Service.ReadWritePaths") {
		if dir := u.stateDir(); dir == "" || !underDir(dir, p) {
			probs = append(probs, fmt.Sprintf("%s: ReadWritePaths %s: the only writable place is the state directory", u.name, p))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(unitHardening)) {
		if v, want := u.get(key, &probs), unitHardening[key]; v != "" && v != want {
			probs = append(probs, fmt.Sprintf("%s: %s=%s, want %s", u.name, key, v, want))
		}
	}
	return probs
}

// leaveRound is how long a leave's drain, or its GROUP-EXIT, takes at
// most when a dnsd does not answer: leaveAttempts requests of
// group.DefaultPushTimeout (the Joiner's timeout, which cmd/mirror does
// not change), with the backoff between them (group.DefaultJoinBackoff,
// doubling) stretched by its +20 % of jitter. Every dnsd is asked at once.
func leaveRound() time.Duration {
	d, backoff := time.Duration(0), group.DefaultJoinBackoff
	for i := range leaveAttempts {
		d += group.DefaultPushTimeout
		if i < leaveAttempts-1 {
			d += backoff * 6 / 5
			backoff = min(2*backoff, group.DefaultJoinMaxBackoff)
		}
	}
	return d
}

// mirrorStopBound is the longest a mirror of cfg takes from SIGTERM to its
// exit, the rule of docs/operating.md: timeouts.shutdown, and for a joined
// mirror before it the leave: the drain, the wait and the GROUP-EXIT
// (leaveRound each). The wait is join.leave_wait; left out, the group's
// ttl.max (at most group.MaxLeaveWait), or group.DefaultLeaveWait when no
// dnsd tells it, after one view request to each dnsd. It returns the
// bound and the wait in it.
func mirrorStopBound(cfg *mirror.Config, ttlMax time.Duration) (bound, wait time.Duration) {
	stop := cfg.Timeouts.Shutdown.D()
	if !cfg.Join.Enabled {
		return stop, 0
	}
	wait = cfg.Join.LeaveWait.D()
	if wait == 0 {
		wait = max(min(ttlMax, group.MaxLeaveWait), group.DefaultLeaveWait) +
			time.Duration(len(cfg.DNSD.URLs))*group.DefaultPushTimeout
	}
	return 2*leaveRound() + wait + stop, wait
}

// unitExample is a config of docs/examples, loaded with the daemon's own
// loader: set for dnsd's, mcfg for the mirror's.
type unitExample struct {
	name string
	text string
	set  *zones.Set
	mcfg *mirror.Config
}

// loadUnitExamples loads every example config in dir by the daemon of its
// name (as TestDocExamples names them).
func loadUnitExamples(t *testing.T, dir string) map[string][]unitExample {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no example configs in %s: %v", dir, err)
	}
	out := make(map[string][]unitExample)
	for _, p := range names {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		ex := unitExample{name: filepath.Base(p), text: string(data)}
		binary := "dnsd"
		if strings.HasPrefix(ex.name, "mirror") {
			binary = "mirror"
			ex.mcfg, err = mirror.LoadConfig(p)
		} else {
			ex.set, err = zones.Load(p)
		}
		if err != nil {
			t.Fatalf("%s: %v", ex.name, err)
		}
		out[binary] = append(out[binary], ex)
	}
	return out
}

// groupTTLMax returns the ttl.max of every group of the dnsd examples, by
// canonical name.
func groupTTLMax(examples []unitExample) map[string]time.Duration {
	out := make(map[string]time.Duration)
	for _, ex := range examples {
		for name, g := range ex.set.Groups {
			out[name] = max(out[name], time.Duration(g.TTL.Max)*time.Second)
		}
	}
	return out
}

// mmdbLine finds geo.mmdb as an example writes it, also in a comment for
// the operator to uncomment.
var mmdbLine = regexp.MustCompile(`(?m)^[\s#]*mmdb:\s*"?([^"\s#]+)`)

// rootLine finds a config's root, as docs/reference/mirror.yaml writes it.
var rootLine = regexp.MustCompile(`(?m)^root:\s*"?([^"\s#]+)`)

// examplePathProblems checks the paths of ex against u, its unit: what the
// daemon writes (dnsd's state_file and the scope estimates beside it, the
// mirror's ACME directory and handoff socket) is in u's state directory,
// a GeoIP database is where the unit does not hide it, and the document
// root is one that u names in ReadOnlyPaths. dir is the directory the
// example was loaded from, which its relative paths were resolved in: an
// installed config is in unitConfigDir.
func examplePathProblems(u *unitFile, ex unitExample, dir string) []string {
	var probs []string
	var writes [][2]string // key, path
	if ex.set != nil && ex.set.StateFile != "" {
		writes = append(writes, [2]string{"state_file", ex.set.StateFile},
			[2]string{"state_file's scope estimates", dispatch.ScopesPath(ex.set.StateFile)})
	}
	if c := ex.mcfg; c != nil {
		if c.TLS.ACME.Enabled() {
			writes = append(writes, [2]string{"tls.acme.dir", c.TLS.ACME.Dir})
		}
		if c.Site.HandoffSocket != "" {
			writes = append(writes, [2]string{"site.handoff_socket", c.Site.HandoffSocket})
		}
	}
	state := u.stateDir()
	for _, w := range writes {
		switch {
		case state == "":
			probs = append(probs, fmt.Sprintf("%s: %s %s: %s has no StateDirectory to write it in", ex.name, w[0], installed(w[1], dir), u.name))
		case !underDir(state, w[1]):
			probs = append(probs, fmt.Sprintf("%s: %s %s: not under %s's state directory %s, where alone it may write",
				ex.name, w[0], installed(w[1], dir), u.name, state))
		}
	}
	for _, m := range mmdbLine.FindAllStringSubmatch(ex.text, -1) {
		p := m[1]
		if !path.IsAbs(p) {
			p = path.Join(unitConfigDir, p)
		}
		for _, h := range unitHidden {
			if underDir(h, p) {
				probs = append(probs, fmt.Sprintf("%s: geo.mmdb %s: %s hides %s", ex.name, p, u.name, h))
			}
		}
	}
	if ex.mcfg != nil && ex.mcfg.Root != "" {
		probs = append(probs, rootProblems(u, ex.name, ex.text, ex.mcfg.Root, dir)...)
	}
	return probs
}

// rootProblems checks a document root (resolved, as the loader leaves it)
// against u's ReadOnlyPaths. A root written relative to the example's
// directory is the tree's placeholder for -check: the example must then
// name the directory that u reads, for the operator to write instead.
func rootProblems(u *unitFile, name, text, root, dir string) []string {
	ro := u.paths("Service.ReadOnlyPaths")
	if len(ro) == 0 {
		return []string{fmt.Sprintf("%s: %s names no ReadOnlyPaths for the document root", name, u.name)}
	}
	if underDir(dir, root) {
		if !slices.ContainsFunc(ro, func(p string) bool { return strings.Contains(text, p) }) {
			return []string{fmt.Sprintf("%s: root %s is relative to the example; it does not say to write one of %s's ReadOnlyPaths %v",
				name, installed(root, dir), u.name, ro)}
		}
		return nil
	}
	if !slices.ContainsFunc(ro, func(p string) bool { return underDir(p, root) }) {
		return []string{fmt.Sprintf("%s: root %s: not under %s's ReadOnlyPaths %v", name, root, u.name, ro)}
	}
	return nil
}

// stopProblems checks u's TimeoutStopSec against the longest stop of its
// mirror examples (mirrorStopBound plus unitStopMargin), and that a
// written join.leave_wait lasts the group's ttl.max, so that the answers
// resolvers cached have run out before GROUP-EXIT.
func stopProblems(u *unitFile, examples []unitExample, ttl map[string]time.Duration) []string {
	var probs []string
	v := u.get("Service.TimeoutStopSec", &probs)
	if v == "" {
		return probs
	}
	got, err := parseTimespan(v)
	if err != nil {
		return append(probs, fmt.Sprintf("%s: TimeoutStopSec=%s: %v", u.name, v, err))
	}
	for _, ex := range examples {
		c := ex.mcfg
		if c == nil {
			continue
		}
		ttlMax, known := ttl[dns.CanonicalName(c.Group)]
		if c.Join.Enabled && !known {
			probs = append(probs, fmt.Sprintf("%s: joins group %s, which no dnsd example has", ex.name, c.Group))
		}
		if w := c.Join.LeaveWait.D(); c.Join.Enabled && w != 0 && known && w < ttlMax {
			probs = append(probs, fmt.Sprintf("%s: join.leave_wait %s is shorter than the group's ttl.max %s", ex.name, w, ttlMax))
		}
		bound, wait := mirrorStopBound(c, ttlMax)
		if need := bound + unitStopMargin; got < need {
			probs = append(probs, fmt.Sprintf("%s: TimeoutStopSec=%s (%s) is shorter than %s needs to stop: %s (leave wait %s, timeouts.shutdown %s, leave requests 2 × %s, margin %s)",
				u.name, v, got, ex.name, need, wait, c.Timeouts.Shutdown.D(), leaveRound(), unitStopMargin))
		}
	}
	return probs
}

// underDir reports whether p is dir or below it.
func underDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel)
}

// installed names p, resolved in the example directory dir, as it would
// be installed: in unitConfigDir when it is relative to the config.
func installed(p, dir string) string {
	if rel, err := filepath.Rel(dir, p); err == nil && filepath.IsLocal(rel) {
		return path.Join(unitConfigDir, filepath.ToSlash(rel)) + " (relative to the config)"
	}
	return p
}

// readUnits parses every unit of unitCases in dir.
func readUnits(t *testing.T, dir string) map[string]*unitFile {
	t.Helper()
	out := make(map[string]*unitFile)
	for _, c := range unitCases {
		data, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		u, err := parseUnit(c.file, string(data))
		if err != nil {
			t.Fatal(err)
		}
		out[c.file] = u
	}
	return out
}

// allUnitProblems runs every check of TestUnits on the units in unitDir
// and the examples in exampleDir, by check.
func allUnitProblems(t *testing.T, unitDir, exampleDir string) map[string][]string {
	t.Helper()
	units := readUnits(t, unitDir)
	examples := loadUnitExamples(t, exampleDir)
	ttl := groupTTLMax(examples["dnsd"])
	out := make(map[string][]string)
	var modes []string
	for _, c := range unitCases {
		u := units[c.file]
		out[c.file+"/directives"] = unitProblems(u, c)
		out[c.file+"/stop"] = stopProblems(u, examples[c.binary], ttl)
		if len(examples[c.binary]) == 0 {
			out[c.file+"/examples"] = []string{"no example config of " + c.binary}
		}
		for _, ex := range examples[c.binary] {
			out[c.file+"/paths/"+ex.name] = examplePathProblems(u, ex, exampleDir)
		}
		modes = append(modes, strings.Join(u.keys["Service.StateDirectoryMode"], " "))
	}
	if slices.Sort(modes); len(slices.Compact(slices.Clone(modes))) != 1 {
		out["StateDirectoryMode"] = []string{fmt.Sprintf("the units share the state directory but set its mode differently: %q", modes)}
	}
	return out
}

// TestUnits checks the systemd units of docs/systemd against the example
// configs of docs/examples, loaded by the daemons' own loaders: the
// directives (binaries in /usr/bin, -check first, the config in
// /etc/transmirror, SIGHUP for reload, user transmirror, the state
// directory as the only writable place, the hardening), TimeoutStopSec
// against the longest stop of every mirror example (a joined mirror
// leaves the group first), and every path an example writes (under
// /var/lib/transmirror) or reads (the document root in ReadOnlyPaths, a
// GeoIP database not hidden). The mutations prove that each check fails on
// what it is there to catch.
func TestUnits(t *testing.T) {
	unitDir := filepath.Join("..", "docs", "systemd")
	exampleDir, err := filepath.Abs(filepath.Join("..", "docs", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for check, probs := range allUnitProblems(t, unitDir, exampleDir) {
		t.Run(check, func(t *testing.T) {
			for _, p := range probs {
				t.Error(p)
			}
		})
	}
	t.Run("reference root", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join("..", "docs", "reference", "mirror.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		m := rootLine.FindStringSubmatch(string(data))
		if m == nil {
			t.Fatal("docs/reference/mirror.yaml writes no root")
		}
		u := readUnits(t, unitDir)["transmirror-mirror.service"]
		for _, p := range rootProblems(u, "docs/reference/mirror.yaml", "", m[1], exampleDir) {
			t.Error(p)
		}
	})

	// Each mutation breaks a copy of the units and the examples (every
	// edit must find its text) and names the check that must then fail,
	// with a part of its problem.
	type edit struct{ file, old, new string }
	mutations := []struct {
		name   string
		edits  []edit
		check  string
		reason string
	}{
		{"TimeoutStopSec too short", []edit{{"transmirror-mirror.service", "TimeoutStopSec=390s", "TimeoutStopSec=40s"}},
			"transmirror-mirror.service/stop", "is shorter than mirror-join.yaml needs"},
		{"TimeoutStopSec just under the bound", []edit{{"transmirror-mirror.service", "TimeoutStopSec=390s", "TimeoutStopSec=6min 10s"}},
			"transmirror-mirror.service/stop", "is shorter than mirror-join.yaml needs"},
		{"ttl.max raised, leave_wait left out", []edit{
			{"dnsd.yaml", "ttl: {min: 20, max: 300}", "ttl: {min: 20, max: 600}"},
			{"mirror-join.yaml", "  leave_wait: 5m\n", ""}},
			"transmirror-mirror.service/stop", "is shorter than mirror-join.yaml needs"},
		{"leave_wait below ttl.max", []edit{{"mirror-join.yaml", "leave_wait: 5m", "leave_wait: 1m"}},
			"transmirror-mirror.service/stop", "shorter than the group's ttl.max"},
		{"state_file under /etc", []edit{{"dnsd.yaml", "state_file: /var/lib/transmirror/dnsd-state.json", "state_file: /etc/transmirror/dnsd-state.json"}},
			"transmirror-dnsd.service/paths/dnsd.yaml", "state_file /etc/transmirror/dnsd-state.json: not under"},
		{"state_file beside the config", []edit{{"dnsd.yaml", "state_file: /var/lib/transmirror/dnsd-state.json", "state_file: dnsd-state.json"}},
			"transmirror-dnsd.service/paths/dnsd.yaml", "(relative to the config): not under"},
		{"no StateDirectory", []edit{{"transmirror-dnsd.service", "StateDirectory=transmirror\n", ""}},
			"transmirror-dnsd.service/paths/dnsd.yaml", "has no StateDirectory"},
		{"ReadWritePaths beside the state", []edit{{"transmirror-mirror.service", "ReadOnlyPaths=-/srv/mirror", "ReadOnlyPaths=-/srv/mirror\nReadWritePaths=/etc/transmirror"}},
			"transmirror-mirror.service/directives", "ReadWritePaths /etc/transmirror"},
		{"ACME dir beside the config", []edit{{"mirror-fra1.yaml", "max_ranges: 16", "max_ranges: 16\ntls: {listen: [\":443\"], acme: {directory: \"https://ca.example.org/acme\", dir: acme}}"}},
			"transmirror-mirror.service/paths/mirror-fra1.yaml", "tls.acme.dir /etc/transmirror/acme"},
		{"binary in /usr/local/bin", []edit{{"transmirror-dnsd.service", "ExecStart=/usr/bin/dnsd", "ExecStart=/usr/local/bin/dnsd"}},
			"transmirror-dnsd.service/directives", "ExecStart runs /usr/local/bin/dnsd"},
		{"another config", []edit{{"transmirror-mirror.service", "-check -config /etc/transmirror/mirror.yaml", "-check -config /etc/mirror.yaml"}},
			"transmirror-mirror.service/directives", "want -config /etc/transmirror/mirror.yaml"},
		{"no -check first", []edit{{"transmirror-dnsd.service", "ExecStartPre=/usr/bin/dnsd -check", "ExecStartPre=/usr/bin/dnsd"}},
			"transmirror-dnsd.service/directives", "want it in ExecStartPre only"},
		{"reload by SIGTERM", []edit{{"transmirror-dnsd.service", "ExecReload=/bin/kill -HUP $MAINPID", "ExecReload=/bin/kill -TERM $MAINPID"}},
			"transmirror-dnsd.service/directives", "want kill -HUP $MAINPID"},
		{"ProtectSystem full", []edit{{"transmirror-mirror.service", "ProtectSystem=strict", "ProtectSystem=full"}},
			"transmirror-mirror.service/directives", "ProtectSystem=full, want strict"},
		{"run as root", []edit{{"transmirror-mirror.service", "User=transmirror", "User=root"}},
			"transmirror-mirror.service/directives", "User=root"},
		{"root not read", []edit{{"transmirror-mirror.service", "ReadOnlyPaths=-/srv/mirror", "ReadOnlyPaths=/srv/www"}},
			"transmirror-mirror.service/paths/mirror-fra1.yaml", "does not say to write one of"},
		{"GeoIP in a home", []edit{{"dnsd.yaml", "# mmdb: /var/lib/GeoIP/GeoLite2-City.mmdb", "# mmdb: /home/ops/GeoLite2-City.mmdb"}},
			"transmirror-dnsd.service/paths/dnsd.yaml", "hides /home"},
		{"state modes differ", []edit{{"transmirror-mirror.service", "StateDirectoryMode=0750", "StateDirectoryMode=0755"}},
			"StateDirectoryMode", "set its mode differently"},
	}
	for _, m := range mutations {
		t.Run("mutation/"+m.name, func(t *testing.T) {
			units, examples := t.TempDir(), t.TempDir()
			copyTree(t, unitDir, units)
			copyTree(t, exampleDir, examples)
			for _, e := range m.edits {
				target := filepath.Join(examples, e.file)
				if strings.HasSuffix(e.file, ".service") {
					target = filepath.Join(units, e.file)
				}
				data, err := os.ReadFile(target)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(data), e.old) {
					t.Fatalf("%s has no %q to break", e.file, e.old)
				}
				if err := os.WriteFile(target, []byte(strings.Replace(string(data), e.old, e.new, 1)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			probs := allUnitProblems(t, units, examples)[m.check]
			if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, m.reason) }) {
				t.Errorf("check %s does not fail with %q; it says %q", m.check, m.reason, probs)
			}
		})
	}
}

// copyTree copies the regular files and directories under src to dst,
// keeping their modes.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm())
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, data, info.Mode().Perm())
		}
		return fmt.Errorf("%s: not a regular file or a directory", p)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnitsVerify runs systemd-analyze verify (Debian's systemd package;
// it needs no running systemd) on a copy of each unit of docs/systemd
// whose binaries are the ones this test run built, so that verify can
// find them: it must exit 0 and say nothing. A copy with a directive that
// systemd ignores proves that verify's warnings are seen.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is not installed (make deps installs it, package systemd): %v", err)
	}
	verify := func(t *testing.T, c unitCase, edit func(string) string) string {
		t.Helper()
		data, err := os.ReadFile(filepath.Join("..", "docs", "systemd", c.file))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for _, b := range unitCases {
			text = strings.ReplaceAll(text, path.Join(unitBinDir, b.binary)+" ", bin(b.binary)+" ")
		}
		if !strings.Contains(text, bin(c.binary)) {
			t.Fatalf("%s does not run %s", c.file, path.Join(unitBinDir, c.binary))
		}
		dir := t.TempDir()
		file := filepath.Join(dir, c.file)
		if err := os.WriteFile(file, []byte(edit(text)), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, analyze, "verify", "--man=no", file)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Sprintf("systemd-analyze verify %s: %v\n%s", c.file, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range unitCases {
		t.Run(c.file, func(t *testing.T) {
			if out := verify(t, c, func(s string) string { return s }); out != "" {
				t.Errorf("systemd-analyze verify %s: %s", c.file, out)
			}
		})
		t.Run("mutation/"+c.file, func(t *testing.T) {
			out := verify(t, c, func(s string) string {
				return strings.Replace(s, "TimeoutStopSec=", "TimeoutStopSec=soon\nTimeoutStopSec=", 1)
			})
			if !strings.Contains(out, "soon") {
				t.Errorf("systemd-analyze verify says nothing of TimeoutStopSec=soon: %q", out)
			}
		})
	}
}
