package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Log lines of dnsd and mirror that carry an address or say "ready".
var (
	dnsListenRE   = regexp.MustCompile(`msg="dns listening" addr=(\S+)`)
	httpListenRE  = regexp.MustCompile(`msg="http listening" addr=(\S+)`)
	adminListenRE = regexp.MustCompile(`msg="admin listening" addr=(\S+)`)
)

// tailLines is how many of a child's last log lines are kept to explain
// its death.
const tailLines = 15

// child is a process the demo started; it is stopped by its PID.
type child struct {
	name  string
	cmd   *exec.Cmd
	ready chan struct{} // closed when the ready line was logged
	done  chan struct{} // closed when the process has been waited for

	mu    sync.Mutex
	err   error // Wait's result, once done
	tail  []string
	addrs map[string]string // "dns", "http", "admin": the first of each
}

// startChild starts path with args, its output going to logPath, and
// watches the output for readyMsg (e.g. `msg="mirror started"`).
//
// The process gets its own process group (so that Ctrl-C in a terminal
// reaches only tmdemo, which then stops the children in order) and, on
// Linux, SIGTERM when tmdemo dies. Because that death signal follows the
// thread that started the child, the starting goroutine keeps its thread
// locked until the child has been waited for.
func startChild(name, path string, args []string, logPath, readyMsg string) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	c := &child{name: name, ready: make(chan struct{}), done: make(chan struct{}), addrs: map[string]string{}}
	c.cmd = exec.Command(path, args...)
	c.cmd.Stdout, c.cmd.Stderr = pw, pw
	c.cmd.SysProcAttr = childSysProcAttr()
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.cmd.Start(); err != nil {
			started <- err
			close(c.done)
			return
		}
		started <- nil
		err := c.cmd.Wait()
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	}()
	err = <-started
	pw.Close() // the child holds the write end now
	if err != nil {
		pr.Close()
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go c.scan(pr, logf, readyMsg)
	return c, nil
}

// scan copies the child's output to its log file, keeps its tail, picks
// up the addresses it reports and closes ready at readyMsg.
func (c *child) scan(r io.ReadCloser, logf *os.File, readyMsg string) {
	defer r.Close()
	defer logf.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	isReady := false
	for sc.Scan() {
		line := sc.Text()
		_, _ = logf.WriteString(line + "\n")
		c.mu.Lock()
		c.tail = append(c.tail, line)
		if len(c.tail) > tailLines {
			c.tail = c.tail[len(c.tail)-tailLines:]
		}
		for key, re := range map[string]*regexp.Regexp{"dns": dnsListenRE, "http": httpListenRE, "admin": adminListenRE} {
			if m := re.FindStringSubmatch(line); m != nil && c.addrs[key] == "" {
				c.addrs[key] = m[1]
			}
		}
		c.mu.Unlock()
		if !isReady && strings.Contains(line, readyMsg) {
			isReady = true
			close(c.ready)
		}
	}
}

// PID returns the child's process ID.
func (c *child) PID() int { return c.cmd.Process.Pid }

// Addr returns the address the child reported for key ("dns", "http",
// "admin"), "" if none.
func (c *child) Addr(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[key]
}

// exitError describes how the child ended, with its last log lines.
func (c *child) exitError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	how := "exited"
	if c.err != nil {
		how = c.err.Error()
	}
	return fmt.Errorf("%s (pid %d) stopped unexpectedly: %s; its last log lines:\n    %s",
		c.name, c.PID(), how, strings.Join(c.tail, "\n    "))
}

// waitReady waits until the child logged its ready line, died, ctx was
// cancelled or timeout passed.
func (c *child) waitReady(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.ready:
		return nil
	case <-c.done:
		select {
		case <-c.ready:
			return nil // ready, then died: the monitor reports it
		default:
		}
		return c.exitError()
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%s (pid %d) not ready within %s; its last log lines:\n    %s",
			c.name, c.PID(), timeout, strings.Join(c.tailCopy(), "\n    "))
	}
}

func (c *child) tailCopy() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.tail...)
}

// exited reports whether the child has been waited for.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stopChildren sends SIGTERM to every child still running, waits up to
// grace for all of them, then kills (SIGKILL) the ones left and waits for
// them. It returns the names of the children that had to be killed.
func stopChildren(children []*child, grace time.Duration) []string {
	for _, c := range children {
		if !c.exited() {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	var killed []string
	for _, c := range children {
		select {
		case <-c.done:
			continue
		case <-deadline.C:
		}
		// The grace is over: kill this one and every other still running.
		for _, k := range children {
			if !k.exited() {
				if err := k.cmd.Process.Kill(); err == nil {
					killed = append(killed, k.name)
				}
			}
		}
		break
	}
	for _, c := range children {
		<-c.done
	}
	return killed
}
