package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFaultStateDir: the state file's directory can not take a change
// (read-only, or on a file system that is full) when one must be
// persisted. Every change (groupctl add, remove, drain, undrain) is refused
// with an error that names the state file; the old state is kept in memory
// (the answers and the group view are unchanged) and on disk (the file is
// unchanged); once the directory takes writes again, the same change
// goes through.
func TestFaultStateDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// before runs before dnsd starts, on the empty state directory;
		// fault makes it refuse writes and returns what undoes that.
		before func(t *testing.T, dir string)
		fault  func(t *testing.T, dir string) (undo func())
	}{
		{"read-only", nil, readOnlyDir},
		{"full", func(t *testing.T, dir string) { mountTmpfs(t, dir, "64k") }, fillDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			stateDir := filepath.Join(dir, "state")
			if err := os.Mkdir(stateDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				tc.before(t, stateDir)
			}
			static := []faultMember{{name: "sin1", ip: "127.0.45.1"}, {name: "nyc1", ip: "127.0.45.2"}}
			d := startDNSD(t, true, "-config", faultDNSD(t, dir, 8, "state_file: state/state.json\n", static...))
			faultAdd(t, d, faultMember{name: "fra9", ip: "127.0.45.9"})
			if out, err := groupctl(t, d.Admin, faultSecret, "drain", faultGroup, "nyc1"); err != nil {
				t.Fatalf("groupctl drain: %v\n%s", err, out)
			}
			statePath := filepath.Join(stateDir, "state.json")
			oldFile := readFileT(t, statePath)
			oldAnswers, oldView := stateSnapshot(t, d)

			undo := tc.fault(t, stateDir)
			changes := []struct {
				what string
				args []string
			}{
				{"add", []string{"add", faultGroup, "-name", "fra8", "-host", "fra8.mirrors.example.test", "-addr", "127.0.45.8", "-capacity", "1000"}},
				{"remove", []string{"remove", faultGroup, "fra9"}},
				{"drain", []string{"drain", faultGroup, "sin1"}},
				{"undrain", []string{"undrain", faultGroup, "nyc1"}},
			}
			errorsBefore := metricSum(scrape(t, d.Admin), "transmirror_dnsd_membership_changes_total", `result="error"`)
			for _, c := range changes {
				out, err := groupctl(t, d.Admin, faultSecret, c.args...)
				t.Logf("groupctl %s with the state directory %s: %v: %s", c.what, tc.name, err, strings.TrimSpace(out))
				if err == nil || !strings.Contains(out, "state file") {
					t.Errorf("groupctl %s: %v, want refused with an error naming the state file:\n%s", c.what, err, out)
				}
			}
			newAnswers, newView := stateSnapshot(t, d)
			if !slices.Equal(newAnswers, oldAnswers) {
				t.Errorf("answers %v after the refused changes, want %v as before", newAnswers, oldAnswers)
			}
			if newView != oldView {
				t.Errorf("group view %s after the refused changes, want %s as before", newView, oldView)
			}
			if got := readFileT(t, statePath); got != oldFile {
				t.Errorf("the state file changed:\n%s\nwant\n%s", got, oldFile)
			}
			if n := metricSum(scrape(t, d.Admin), "transmirror_dnsd_membership_changes_total", `result="error"`) - errorsBefore; int(n) != len(changes) {
				t.Errorf("membership_changes_total{result=error} rose by %g, want %d", n, len(changes))
			}
			if leftovers, _ := filepath.Glob(filepath.Join(stateDir, ".state.json.tmp-*")); len(leftovers) > 0 {
				t.Errorf("temporary files left in the state directory: %v", leftovers)
			}

			// Writable again: a change goes through, on disk and in the
			// answers. (Another member than the refused add's: the same
			// command within the same second carries the same signature,
			// which dnsd refuses as a replay even though the first was
			// refused.)
			undo()
			if out, err := groupctl(t, d.Admin, faultSecret, "add", faultGroup, "-name", "fra7", "-host", "fra7.mirrors.example.test",
				"-addr", "127.0.45.7", "-capacity", "1000"); err != nil {
				t.Fatalf("groupctl add once the state directory takes writes: %v\n%s", err, out)
			}
			if a, _ := stateSnapshot(t, d); !slices.Contains(a, "127.0.45.7") {
				t.Errorf("answers %v after the add, want 127.0.45.7 in them", a)
			}
			if got := readFileT(t, statePath); !strings.Contains(got, `"fra7"`) {
				t.Errorf("the state file lacks the member added once writable:\n%s", got)
			}
		})
	}
}

// stateSnapshot returns the group's answer (sorted) and the members'
// sources and states, as a string.
func stateSnapshot(t *testing.T, d *dnsdProc) ([]string, string) {
	t.Helper()
	r := d.Dig(t, faultGroup, "A")
	if r.Status != "NOERROR" {
		t.Fatalf("dig: %s\n%s", r.Status, r.Raw)
	}
	var a []string
	for _, x := range r.Answer {
		a = append(a, x.Data)
	}
	slices.Sort(a)
	v, err := groupView(d.Admin)
	if err != nil {
		t.Fatal(err)
	}
	var ms []string
	for _, m := range v.Members {
		ms = append(ms, m.Name+":"+m.Source+":"+m.State)
	}
	slices.Sort(ms)
	return a, strings.Join(ms, " ")
}

// readOnlyDir makes dir read-only: a read-only bind mount of it on
// itself (root ignores permissions), or, for another user, its mode.
func readOnlyDir(t *testing.T, dir string) func() {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		return func() { _ = os.Chmod(dir, 0o755) }
	}
	mount(t, "--bind", dir, dir)
	umount := unmountOnCleanup(t, dir)
	mount(t, "-o", "remount,bind,ro", dir)
	return umount
}

// mountTmpfs mounts a tmpfs of size on dir until the test ends. Only root
// can mount one: for another user the test fails saying so, since a full
// disk is a scenario the state file must survive, not an optional one.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("a full file system needs a tmpfs of its own, which only root can mount: run the e2e tests as root (or in a user and mount namespace: unshare -rm go test ./e2e/)")
	}
	mount(t, "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir)
	unmountOnCleanup(t, dir)
}

// fillDir fills the file system of dir (a small tmpfs) with one file.
func fillDir(t *testing.T, dir string) func() {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for i := 0; ; i++ {
		if _, err = f.Write(block); err != nil {
			break
		}
		if i > 1<<16 {
			t.Fatalf("wrote 256 MiB into %s and it is not full", dir)
		}
	}
	f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

func mount(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// unmountOnCleanup unmounts dir when the test ends, or when the returned
// function is called, whichever is first.
func unmountOnCleanup(t *testing.T, dir string) func() {
	done := false
	umount := func() {
		if done {
			return
		}
		done = true
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, err := exec.Command("umount", dir).CombinedOutput()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				// Busy: detach it, so that nothing stays mounted.
				if out2, err2 := exec.Command("umount", "-l", dir).CombinedOutput(); err2 != nil {
					t.Errorf("umount %s: %v: %s; umount -l: %v: %s", dir, err, out, err2, out2)
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Cleanup(umount)
	return umount
}
