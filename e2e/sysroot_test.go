package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// sysroot is a throwaway Debian system of the test's own, booted by the
// real systemd: this machine's root under an overlay whose writes go to a
// temporary directory (the packages the test installs, the users they
// add, the state of their services), in namespaces of its own (mount,
// PID, whose init is systemd, and network, with only lo), so that nothing
// of it reaches this machine or past loopback. Killing its init ends it
// all.
type sysroot struct {
	init int // systemd's PID, as this machine sees it
}

// sysrootTarget is the unit the system boots: nothing but itself, so
// that only what the test starts runs, and journald.
const sysrootTarget = `[Unit]
Description=transmirror e2e: the units under test only
Wants=systemd-journald.socket
AllowIsolate=yes
`

// sysrootScript mounts the overlay root and executes systemd in it; $1 is
// the directory of the overlay's layers.
const sysrootScript = `set -e
T="$1"
mount -t overlay overlay -o lowerdir=/,upperdir="$T/upper",workdir="$T/work" "$T/root"
mount -t proc proc "$T/root/proc"
mount --rbind /dev "$T/root/dev"
mount --rbind /sys "$T/root/sys"
mount -t tmpfs tmpfs "$T/root/sys/fs/cgroup"
mkdir -p "$T/root/sys/fs/cgroup/systemd"
mount -t cgroup -o none,name=systemd cgroup "$T/root/sys/fs/cgroup/systemd"
mount -t tmpfs tmpfs "$T/root/tmp"
mount -t tmpfs tmpfs "$T/root/run"
ip link set lo up
exec chroot "$T/root" /lib/systemd/systemd --system --unit=transmirror-e2e.target
`

// bootSysroot boots one for the test and returns when systemd is up.
func bootSysroot(t *testing.T) *sysroot {
	t.Helper()
	for _, tool := range []string{"unshare", "nsenter", "ip", "/lib/systemd/systemd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it): %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("the packages are installed into a system of the test's own, in namespaces that only root can make: run the e2e tests as root")
	}
	dir := t.TempDir()
	for _, d := range []string{"upper/etc/systemd/system", "work", "root"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, "upper/etc/systemd/system"), "transmirror-e2e.target", sysrootTarget)
	log, err := os.Create(filepath.Join(dir, "boot.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--net", "--pid", "--fork", "--propagation", "private", "sh", "-c", sysrootScript, "sh", dir)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &sysroot{}
	t.Cleanup(func() {
		if s.init > 0 {
			_ = syscall.Kill(s.init, syscall.SIGKILL) // the PID namespace's init: everything in it goes
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
	})
	probetest.Until(t, 60*time.Second, func() string {
		if s.init == 0 {
			s.init = childOf(cmd.Process.Pid)
			return "systemd has not started yet"
		}
		out, err := s.run("systemctl", "is-system-running")
		if state := strings.TrimSpace(out); err != nil && state != "degraded" || state == "starting" || state == "initializing" {
			boot, _ := os.ReadFile(log.Name())
			return fmt.Sprintf("systemd is %q (%v); boot log:\n%s", state, err, boot)
		}
		return ""
	})
	return s
}

// childOf is the first child of process pid, 0 for none yet.
func childOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// command is name with args run in the system: its namespaces, root and
// working directory (/).
func (s *sysroot) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(s.init), "--mount", "--pid", "--net",
		"--root", "--wd", "--", name}, args...)...)
}

// run runs name with args in the system for at most a minute and returns
// what it printed.
func (s *sysroot) run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.command(ctx, name, args...).CombinedOutput()
	return string(out), err
}

// must is run, failing the test on an error.
func (s *sysroot) must(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := s.run(name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// writeFile writes content to path in the system, from inside it (the
// overlay's layers must not change under it), mode 0644.
func (s *sysroot) writeFile(t *testing.T, path, content string) {
	t.Helper()
	s.write(t, path, strings.NewReader(content))
}

// copyIn copies the file at host, on this machine, to path in the
// system (whose /tmp is its own), mode 0644.
func (s *sysroot) copyIn(t *testing.T, host, path string) {
	t.Helper()
	f, err := os.Open(host)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.write(t, path, f)
}

// write writes what r holds to path in the system.
func (s *sysroot) write(t *testing.T, path string, r io.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := s.command(ctx, "sh", "-c", `mkdir -p "$(dirname "$1")" && cat > "$1" && chmod 0644 "$1"`, "sh", path)
	cmd.Stdin = r
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writing %s in the system: %v\n%s", path, err, out)
	}
}

// install copies the packages into the system and installs them with
// dpkg.
func (s *sysroot) install(t *testing.T, debs ...string) {
	t.Helper()
	args := []string{"-i"}
	for _, d := range debs {
		in := "/root/" + filepath.Base(d)
		s.copyIn(t, d, in)
		args = append(args, in)
	}
	s.must(t, "dpkg", args...)
}
