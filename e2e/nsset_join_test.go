package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// The addresses of the NS-set join scenario's mirrors: static1 is the
// group's member from the config (startNSSet), joi1 joins by itself.
const (
	nssetStaticIP = "127.0.10.1"
	nssetJoinIP   = "127.0.10.77"
)

// TestNSSetJoinAndLeave: a mirror that joins by itself, given the three
// nodes of an NS set, is in the answers of all three; on SIGTERM it
// leaves all three's answers before it stops serving, and clients that
// fetch through the group name, each resolving through its own node and
// honouring the TTL, get every file meanwhile.
func TestNSSetJoinAndLeave(t *testing.T) {
	t.Parallel()
	s := startNSSet(t, 3)
	dir := t.TempDir()
	content := faultContent()
	if err := os.MkdirAll(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "root"), "f.bin", string(content))
	mirrorCfg := joinMirrorConfig(s.nodes...)
	port, _ := startFaultMirrors(t, dir, []faultMember{{name: "static1", ip: nssetStaticIP}}, mirrorCfg)

	began := time.Now()
	m, _, err := launchFaultMirror(t, dir, faultMember{name: "joi1", ip: nssetJoinIP}, net.JoinHostPort(nssetJoinIP, port), mirrorCfg)
	if err != nil {
		t.Fatal(err)
	}
	in := waitAnswered(t, s.nodes, nssetJoinIP, true, 5*time.Second)
	t.Logf("figure: start → in the answers of all three nodes: %v (seen %v after the wait began)",
		time.Since(began).Round(time.Millisecond), in.Round(time.Millisecond))

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var clients []*ttlClients
	for _, d := range s.nodes {
		clients = append(clients, runTTLClients(ctx, 2, d.Addr, port, content))
	}
	from := func() (n int) {
		for _, c := range clients {
			n += c.from(nssetJoinIP)
		}
		return n
	}
	probetest.Until(t, 5*time.Second, func() string {
		if n := from(); n < 20 {
			return fmt.Sprintf("%d files fetched from %s", n, nssetJoinIP)
		}
		return ""
	})
	term := time.Now()
	m.Signal(syscall.SIGTERM)
	out := waitAnswered(t, s.nodes, nssetJoinIP, false, 5*time.Second)
	if m.Exited() {
		t.Fatalf("the mirror exited before it left every node's answers:\n%s", m.Logs())
	}
	exitAt := waitLeft(t, m, nssetJoinIP, port, content, term)
	// The clients go on, on static1, after the exit.
	total := func() (n int) {
		for _, c := range clients {
			n += c.total()
		}
		return n
	}
	after := total()
	probetest.Until(t, 5*time.Second, func() string {
		if total() < after+20 {
			return "clients stalled after the exit"
		}
		return ""
	})
	stop()
	failed := 0
	for _, c := range clients {
		c.wait()
		if f := int(c.failed.Load()); f > 0 {
			failed += f
			t.Errorf("%d fetches failed through one node during the leave: %s", f, c.firstErrors())
		}
	}
	t.Logf("figure: leave after SIGTERM: out of all three nodes' answers %v, exit %v; %d fetches, %d from the leaving mirror, %d failed",
		out.Round(time.Millisecond), exitAt.Round(time.Millisecond), total(), from(), failed)
	for i, d := range s.nodes {
		if st, err := memberStates(d.Admin); err != nil || st["joi1"] != "" {
			t.Errorf("node %d still lists joi1 after its leave: %v %v", i+1, st, err)
		}
	}
}
