package benchdns

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// server is one DNS server process under test, started by this
// benchmark and stopped by it (by PID, SIGTERM then SIGKILL).
type server struct {
	name  string
	addr  string // host:port, UDP and TCP
	admin string // dnsd's admin listener, host:port
	pid   int
	log   string // its stdout and stderr
	done  chan struct{}
}

// startProcess starts argv pinned with taskset to -server-cpu, output to
// logPath; taskset execs the server, so the PID is the server's.
func startProcess(b *testing.B, name, logPath string, env []string, argv ...string) *server {
	b.Helper()
	out, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("taskset", append([]string{"-c", *flagServerCPU}, argv...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		out.Close()
		b.Fatalf("%s: %v", name, err)
	}
	s := &server{name: name, pid: cmd.Process.Pid, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(s.done)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// logs returns what the server wrote so far.
func (s *server) logs() string {
	data, _ := os.ReadFile(s.log)
	return string(data)
}

// exited reports whether the process has ended.
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// startDNSD starts dnsd on 127.0.0.1:0 and reads the port it picked from
// its JSON log ({"msg":"dns listening","addr":…}), then waits until it
// answers.
func startDNSD(b *testing.B, bin, cfg string, procs int) *server {
	b.Helper()
	var env []string
	if procs > 0 {
		env = []string{"GOMAXPROCS=" + strconv.Itoa(procs)}
	}
	s := startProcess(b, "dnsd", filepath.Join(filepath.Dir(cfg), "dnsd.log"), env, bin, "-config", cfg, "-log-format", "json")
	deadline := time.Now().Add(30 * time.Second)
	for s.addr == "" {
		if s.exited() || time.Now().After(deadline) {
			b.Fatalf("dnsd did not report its address:\n%s", s.logs())
		}
		s.addr = listenAddr(s.log)
		if s.addr == "" {
			time.Sleep(20 * time.Millisecond) // poll, bounded by the deadline
		}
	}
	waitAnswers(b, s, deadline)
	s.admin = loggedAddr(s.log, "admin listening")
	return s
}

// listenAddr returns the address of dnsd's first "dns listening" log
// record in path, or "".
func listenAddr(path string) string { return loggedAddr(path, "dns listening") }

// loggedAddr returns the address of dnsd's first log record msg in path,
// or "".
func loggedAddr(path, msg string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == msg {
			return rec.Addr
		}
	}
	return ""
}

// startGdnsd starts gdnsd in the foreground (gdnsd -c dir start) on a
// free loopback port: gdnsd has no port 0, so the port is one the kernel
// just handed out for both UDP and TCP and released.
func startGdnsd(b *testing.B, bin, dir, mmdb string) *server {
	b.Helper()
	port, err := freePort()
	if err != nil {
		b.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := writeGdnsdConfig(dir, addr, mmdb); err != nil {
		b.Fatal(err)
	}
	s := startProcess(b, "gdnsd", filepath.Join(dir, "gdnsd.log"), nil, bin, "-c", dir, "start")
	s.addr = addr
	waitAnswers(b, s, time.Now().Add(30*time.Second))
	return s
}

// freePort returns a port that was free on 127.0.0.1 for UDP and TCP.
func freePort() (int, error) {
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := pc.LocalAddr().(*net.UDPAddr).Port
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		pc.Close()
		if err == nil {
			ln.Close()
			return port, nil
		}
	}
	return 0, errors.New("benchdns: no port free for both UDP and TCP on 127.0.0.1")
}

// waitAnswers polls s with the static name until it answers or the
// deadline passes.
func waitAnswers(b *testing.B, s *server, deadline time.Time) {
	b.Helper()
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	q := new(dns.Msg)
	q.SetQuestion(staticName, dns.TypeA)
	for {
		r, _, err := c.Exchange(q, s.addr)
		if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
			return
		}
		if s.exited() || time.Now().After(deadline) {
			b.Fatalf("%s on %s does not answer (%v):\n%s", s.name, s.addr, err, s.logs())
		}
		time.Sleep(20 * time.Millisecond) // poll, bounded by the deadline
	}
}

// version runs argv and returns "name 1.2.3", the version being the last
// word of the first line of its output that says "version".
func version(argv ...string) string {
	name := filepath.Base(argv[0])
	out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(strings.ToLower(l), "version") {
			return name + " " + f[len(f)-1]
		}
	}
	return name + " (version unknown)"
}
