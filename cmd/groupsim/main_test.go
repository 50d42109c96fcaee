package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func groupsim(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = run(args, &out, &errs)
	return code, out.String(), errs.String()
}

// TestHelp: -h documents every flag and exits 0.
func TestHelp(t *testing.T) {
	code, _, usage := groupsim(t, "-h")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, name := range []string{"log", "seed", "requests", "objects", "alpha", "max-size", "clients", "policies", "backends",
		"memory-ratio", "max-object", "outstanding", "warmup", "format", "report"} {
		if !strings.Contains(usage, "  -"+name+" ") && !strings.Contains(usage, "  -"+name+"\n") {
			t.Errorf("-h does not document -%s:\n%s", name, usage)
		}
	}
}

// TestDeterministic: the same flags give the same bytes; CSV has a row
// per policy and number of back ends.
func TestDeterministic(t *testing.T) {
	args := []string{"-requests", "20000", "-objects", "2000", "-backends", "1,4", "-policies", "wrr,lard", "-format", "csv"}
	_, a, _ := groupsim(t, args...)
	code, b, errs := groupsim(t, args...)
	if code != 0 || a != b {
		t.Fatalf("exit %d (%s); two runs:\n%s\n%s", code, errs, a, b)
	}
	lines := strings.Split(strings.TrimSpace(a), "\n")
	if len(lines) != 5 || lines[0] != "backends,policy,req/s,hit,byte_hit,max/mean,cv,cpu,disk" || !strings.HasPrefix(lines[4], "4,lard,") {
		t.Errorf("output:\n%s", a)
	}
}

// TestLog: a log is replayed and its broken lines are reported, not
// fatal; a log with no request is an error.
func TestLog(t *testing.T) {
	dir := t.TempDir()
	var log strings.Builder
	for i := range 2000 {
		log.WriteString("h" + string(rune('a'+i%7)) + ` - - [01/Jul/1995:00:00:01 -0400] "GET /f` + string(rune('a'+i%13)) + ` HTTP/1.0" 200 4096` + "\n")
	}
	log.WriteString("this is not a log line\n")
	path := filepath.Join(dir, "access.log")
	if err := os.WriteFile(path, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := groupsim(t, "-log", path, "-backends", "2", "-policies", "lard")
	if code != 0 || !strings.Contains(errs, "2001 lines, 2000 requests, 1 broken") || !strings.Contains(errs, "line 2001: ") ||
		!strings.Contains(out, "2         lard") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	empty := filepath.Join(dir, "empty.log")
	os.WriteFile(empty, []byte("junk\n"), 0o644)
	if code, _, errs := groupsim(t, "-log", empty); code != 1 || !strings.Contains(errs, "no request could be read") {
		t.Errorf("a log of junk: exit %d, %s", code, errs)
	}
}

// TestBadFlags: what groupsim can not run is a usage error, exit 2.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-policies", "nope"}, {"-backends", "0"}, {"-format", "xml"}, {"-warmup", "1"}, {"extra"}} {
		if code, _, _ := groupsim(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestReport: -report writes simulation.md and its two charts, the same
// bytes every time, with the claims table.
func TestReport(t *testing.T) {
	var runs [2]map[string]string
	for i := range runs {
		dir := t.TempDir()
		if code, _, errs := groupsim(t, "-requests", "5000", "-objects", "500", "-report", dir); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		runs[i] = map[string]string{}
		for _, name := range []string{"simulation.md", "sim-site-backends.svg", "sim-site-memory.svg"} {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			runs[i][name] = string(data)
		}
	}
	if !reflect.DeepEqual(runs[0], runs[1]) {
		t.Error("two reports differ")
	}
	md := runs[0]["simulation.md"]
	for _, want := range []string{"![](sim-site-backends.svg)", "| lard | req/s |", "## The literature's claims", "| LARD 2–4× WRR's throughput"} {
		if !strings.Contains(md, want) {
			t.Errorf("simulation.md has no %q:\n%s", want, md)
		}
	}
}
