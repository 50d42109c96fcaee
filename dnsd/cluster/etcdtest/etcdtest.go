// Package etcdtest starts a real etcd server (the etcd binary of Debian's
// etcd-server package, which make deps installs) on loopback for the tests
// of dnsd's packages: one member, a data directory of the test's own, ports
// that were free a moment ago (etcd can not report a port it chose), and
// stopped by its PID when the test ends. StartSecure starts one with
// client TLS, client-certificate auth and etcd's RBAC on (secure.go).
// Tests only.
package etcdtest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// Binary is the etcd server executable, looked up in PATH.
const Binary = "etcd"

// Server is a running etcd.
type Server struct {
	t       testing.TB
	dir     string
	client  string // http://127.0.0.1:PORT
	peer    string
	mu      sync.Mutex
	logs    bytes.Buffer
	cmd     *exec.Cmd
	done    chan struct{}
	stopped bool
	flags   []string // slowDisk's
	sec     *secure  // StartSecure's TLS and users; nil for a plain etcd
	hc      *http.Client
}

// Start starts etcd with a fresh data directory and waits until it serves
// clients; it retries with other ports when one was taken meanwhile.
func Start(t testing.TB) *Server {
	t.Helper()
	base, flags := slowDisk(t)
	s := &Server{t: t, flags: flags, hc: &http.Client{Timeout: time.Second}}
	s.start(base, "http")
	return s
}

// start runs etcd on free ports (URLs of scheme), trying again with
// others when a start fails, and stops it when the test ends.
func (s *Server) start(base, scheme string) {
	s.t.Helper()
	var err error
	for i := range 5 {
		s.dir = fmt.Sprintf("%s/%d", base, i) // a failed start may leave a member behind
		s.client = scheme + "://" + probetest.FreeAddr(s.t, "tcp")
		s.peer = "http://" + probetest.FreeAddr(s.t, "tcp")
		if err = s.run(); err == nil {
			s.t.Cleanup(s.Stop)
			return
		}
	}
	s.t.Fatalf("etcdtest: %v", err)
}

// Endpoint is the client URL.
func (s *Server) Endpoint() string { return s.client }

// Logs are what etcd wrote so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// Stop stops etcd (SIGTERM, then SIGKILL after 10 s) and waits for it;
// it is idempotent. The data directory stays, for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Kill stops etcd at once with SIGKILL, as a crash would.
func (s *Server) Kill() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Restart starts etcd again on the same ports and data directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	for range 10 { // the old sockets may linger a moment
		if err = s.run(); err == nil {
			return
		}
	}
	s.t.Fatalf("etcdtest: restart: %v", err)
}

// slowDisk makes the test etcd tolerate a slow, shared disk: it returns
// the directory for etcd's data and the flags to add. From etcd 3.5 on
// that is --unsafe-no-fsync (a test's data need not survive a power cut)
// and the test's temporary directory; before (Debian's etcd-server may be
// 3.4, which refuses flags it does not know) the data go to a memory file
// system, where an fsync costs nothing, when the machine has one. The
// election timeout stays etcd's 1 s: it also sets the shortest lease etcd
// grants (1.5 election timeouts), and the tests expire leases of 2 s.
func slowDisk(t testing.TB) (dir string, flags []string) {
	t.Helper()
	help, _ := exec.Command(Binary, "--help").CombinedOutput()
	if bytes.Contains(help, []byte("--unsafe-no-fsync")) {
		return t.TempDir(), []string{"--unsafe-no-fsync"}
	}
	const memFS = "/dev/shm"
	dir, err := os.MkdirTemp(memFS, "etcdtest-")
	if err != nil {
		return t.TempDir(), nil
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir, nil
}

func (s *Server) run() error {
	cmd := exec.Command(Binary, append([]string{
		"--name", "default",
		"--data-dir", s.dir,
		"--listen-client-urls", s.client, "--advertise-client-urls", s.client,
		"--listen-peer-urls", s.peer, "--initial-advertise-peer-urls", s.peer,
		"--initial-cluster", "default=" + s.peer,
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "info"},
		append(s.flags, s.sec.flags()...)...)...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s (make deps installs it): %w", Binary, err)
	}
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(done)
	}()
	if err := s.ready(cmd, done); err != nil {
		return err
	}
	s.mu.Lock()
	s.cmd, s.done, s.stopped = cmd, done, false
	s.mu.Unlock()
	return nil
}

// ready waits until etcd's own health endpoint says true (it has a
// leader and serves), polled until a deadline; it kills etcd when that
// passes.
func (s *Server) ready(cmd *exec.Cmd, done <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("etcd exited before it was ready:\n%s", tail(s.Logs()))
		default:
		}
		if healthy(s.hc, s.client) {
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("etcd not ready within 30s:\n%s", tail(s.Logs()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// healthy reports whether etcd at url answers its /health with true.
func healthy(hc *http.Client, url string) bool {
	resp, err := hc.Get(url + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"true"`)
}

func tail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// Metrics returns etcd's own metrics (GET /metrics, the Prometheus text
// format).
func (s *Server) Metrics() (string, error) {
	resp, err := s.hc.Get(s.client + "/metrics")
	if err != nil {
		return "", fmt.Errorf("etcdtest: metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("etcdtest: metrics: %s %v", resp.Status, err)
	}
	return string(body), nil
}
