package members_test

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/zones"
)

// lockedBuffer is a bytes.Buffer for a logger.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStateFileSummary: a state file of 200,000 run-time members (and
// 1,000 more of a group no longer configured) makes a handful of log
// lines at start, not one a member: the first maxLoggedProblems problems
// one by one, then a count. Only the entries a group can have are read;
// the valid members among them are served up to max_runtime_members,
// whether they come before or after invalid ones.
func TestStateFileSummary(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"example.org.zone": testenv.Zone, "dnsd.yaml": testenv.Config("")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const total = 200_000
	var seventeen []string
	for i := range 17 {
		seventeen = append(seventeen, fmt.Sprintf(`"10.9.0.%d"`, i+1))
	}
	f, err := os.Create(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	member := func(i int) string {
		return fmt.Sprintf(`{"name":"m%06d","host":"m%06d.example.org.","addresses":["10.%d.%d.%d"],"capacity":10}`, i, i, i>>16, (i>>8)&255, i&255)
	}
	fmt.Fprint(w, `{"version":1,"members":{"www.example.org.":[`)
	for i := range total {
		if i > 0 {
			w.WriteString(",")
		}
		switch i {
		case 3, 4, 5: // too many addresses
			fmt.Fprintf(w, `{"name":"bad%d","host":"bad%d.example.org.","addresses":[%s],"capacity":10}`, i, i, strings.Join(seventeen, ","))
		case 6, 7: // the group's own name
			fmt.Fprintf(w, `{"name":"loop%d","host":"WWW.example.org","addresses":["10.8.0.1"],"capacity":10}`, i)
		default:
			w.WriteString(member(i))
		}
	}
	fmt.Fprint(w, `],"gone.example.org.":[`)
	for i := range 1000 {
		if i > 0 {
			w.WriteString(",")
		}
		w.WriteString(member(i))
	}
	fmt.Fprint(w, "]},\"drained\":{}}\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	reg := prometheus.NewRegistry()
	disp, err := dispatch.New(dispatch.Options{Registry: reg, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := members.New(members.Options{Registry: reg, Answers: disp, Server: testenv.Server(t, reg, disp),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	if err := ctl.Load(set); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	t.Logf("Load of %d run-time members: %v, %d MB allocated, %d log lines:\n%s", total+1000, took,
		(after.TotalAlloc-before.TotalAlloc)>>20, len(lines), logs.String())
	// Problems: the entries past the cap (of two groups), the group no
	// longer configured, five invalid members, those past
	// max_runtime_members: five logged one by one, then the count.
	if len(lines) != 6 {
		t.Errorf("%d log lines, want 6 (5 problems and a count)", len(lines))
	}
	capped := zones.MaxGroupMembers
	for _, want := range []string{
		fmt.Sprintf(`msg="state file: entries past the most a group can have not read" group=www.example.org. entries=%d max=%d`, total-capped, capped),
		fmt.Sprintf(`msg="state file: entries past the most a group can have not read" group=gone.example.org. entries=%d max=%d`, 1000-capped, capped),
		fmt.Sprintf(`msg="run-time members not served" group=gone.example.org. members=%d err="unknown group"`, capped),
		`msg="run-time member not served" group=www.example.org. member=bad3 err="zones: group \"www.example.org.\": member \"bad3\": addresses: 17, at most 16 per member"`,
		`msg="run-time state: more problems, not logged one by one" problems=9 logged=5`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s", want)
		}
	}
	g := ctl.Current().Group("www.example.org.")
	max := g.MaxRuntimeMembers
	if n := len(g.Members); n != 1+max {
		t.Fatalf("%d members served, want fra1 and %d run-time ones", n, max)
	}
	for i, want := range []string{"fra1", "m000000", "m000001", "m000002", "m000008"} {
		if g.Members[i].Name != want {
			t.Errorf("member %d is %s, want %s", i, g.Members[i].Name, want)
		}
	}
}
