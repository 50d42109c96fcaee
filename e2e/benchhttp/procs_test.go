package benchhttp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// proc is one server process this benchmark started, pinned with
// taskset (which execs it, so the PID is the server's); it is stopped by
// its PID, and its children's (nginx's workers), when the benchmark
// ends.
type proc struct {
	name string
	pid  int
	done chan struct{}
	mu   sync.Mutex
	logs strings.Builder
}

// output returns what the process wrote so far.
func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startPinned starts argv on the CPUs of cpus; line, if not nil, gets
// every line of its output (stdout and stderr) until it returns true.
func startPinned(b *testing.B, name, cpus string, line func(string) bool, argv ...string) *proc {
	b.Helper()
	cmd := exec.Command("taskset", append([]string{"-c", cpus}, argv...)...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	p := &proc{name: name, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	go p.read(pr, line)
	b.Cleanup(func() { p.stop(b, cmd.Process) })
	return p
}

// read keeps the output and hands each line to line until it returns
// true; it drains the pipe to the end, so the process never blocks.
func (p *proc) read(r io.Reader, line func(string) bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		p.mu.Lock()
		if p.logs.Len() < 1<<20 {
			p.logs.WriteString(sc.Text() + "\n")
		}
		p.mu.Unlock()
		if line != nil && line(sc.Text()) {
			line = nil
		}
	}
	if line != nil {
		line("") // the end: the process closed its output
	}
}

// stop sends SIGTERM to the process and waits up to 10 s for it, then
// kills it and the children it had (nginx's workers outlive a killed
// master).
func (p *proc) stop(b *testing.B, pr *os.Process) {
	kids, _ := children(p.pid)
	_ = pr.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(10 * time.Second):
	}
	b.Logf("%s (pid %d) did not stop within 10s of SIGTERM; killing it and its children %v", p.name, p.pid, kids)
	_ = pr.Kill()
	for _, k := range kids {
		if q, err := os.FindProcess(k); err == nil {
			_ = q.Kill()
		}
	}
	<-p.done
}

// mirrorLog is the part of a mirror's JSON log record it reports its
// addresses with: msg "http listening" (one per public address), then
// "admin listening", then "mirror started" (cmd/mirror's doc).
type mirrorLog struct {
	Msg  string `json:"msg"`
	Addr string `json:"addr"`
}

// startMirror writes cfg to path and starts the mirror on it, its admin
// listener on 127.0.0.1:0, and returns it once it logged "mirror
// started", with the first public address it logged.
func startMirror(b *testing.B, bin, cpus, name, path, cfg string) (*proc, string) {
	b.Helper()
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	addr := make(chan string, 1)
	var first string
	p := startPinned(b, name, cpus, func(line string) bool {
		var rec mirrorLog
		if json.Unmarshal([]byte(line), &rec) != nil {
			if line == "" {
				addr <- ""
				return true
			}
			return false
		}
		if rec.Msg == "http listening" && first == "" {
			first = rec.Addr
		}
		if rec.Msg == "mirror started" {
			addr <- first
			return true
		}
		return false
	}, bin, "-config", path, "-admin", "127.0.0.1:0", "-log-format", "json")
	select {
	case a := <-addr:
		if a == "" {
			b.Fatalf("%s exited or logged no address before it started:\n%s", name, p.output())
		}
		return p, a
	case <-time.After(30 * time.Second):
		b.Fatalf("%s not started within 30s:\n%s", name, p.output())
	}
	return nil, ""
}

// startFree starts a server that can not listen on port 0 and say which
// port it got (HAProxy, nginx) on a port that was free a moment ago:
// start writes its config for addr and starts it. It waits until the
// server answers the 4 KiB file; a server that exits because another
// process took the port meanwhile is started again on another (3 tries).
func startFree(b *testing.B, name string, start func(addr string) *proc) (*proc, string) {
	b.Helper()
	for try := 1; ; try++ {
		addr := probetest.FreeAddr(b, "tcp")
		p := start(addr)
		if serves(b, p, "http://"+addr+smallPath) {
			return p, addr
		}
		if try == 3 || !strings.Contains(p.output(), "in use") {
			b.Fatalf("%s on %s exited (try %d):\n%s", name, addr, try, p.output())
		}
	}
}

// waitHTTP waits until url answers 200 (see serves) and fails if p
// exits first.
func waitHTTP(b *testing.B, p *proc, url string) {
	b.Helper()
	if !serves(b, p, url) {
		b.Fatalf("%s exited:\n%s", p.name, p.output())
	}
}

// serves polls url until it answers 200, for 30 s at most (a front
// end whose back ends are not checked healthy yet answers 502 or 503),
// and reports false if p exited first.
func serves(b *testing.B, p *proc, url string) bool {
	b.Helper()
	exited := false
	probetest.Until(b, 30*time.Second, func() string {
		if exited = p.exited(); exited {
			return ""
		}
		code, err := status(url)
		if err == nil && code == 200 {
			return ""
		}
		return fmt.Sprintf("%s: %s: status %d, %v\n%s", p.name, url, code, err, p.output())
	})
	return !exited
}
