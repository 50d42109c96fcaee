// Command tmdemo runs a whole transmirror mirror group on this machine,
// on loopback only, for an operator's first hour: one dnsd answering the
// group www.example.test with the geo-load policy, and three mirror sites
// (fra1 in Europe, nyc1 in North America, sin1 in Asia), each a front end
// with the LARD site policy over two back ends that serve a generated
// content tree from their memory caches. The front ends push their load to
// dnsd and redirect (302) when they are over their watermark.
//
// Usage:
//
//	tmdemo [-bin DIR]
//	tmdemo -version    print the version on one line and exit 0
//
// DIR holds the built dnsd, mirror and groupctl (default: the directory
// of the tmdemo executable). Everything the demo needs (zone, a GeoIP
// database made from a CSV table, configs, content, logs) goes into a new
// temporary directory that is removed on exit.
//
// dnsd listens on the fixed addresses 127.0.0.1:5300 (DNS) and
// 127.0.0.1:8053 (admin, dashboard), and the front ends on 127.0.1.1,
// 127.0.2.1 and 127.0.3.1, port 8080, so that the commands tmdemo prints
// (dig, curl, groupctl status, groupctl load) are the same on every run;
// tmdemo stops with a clear message when one of them is taken.
//
// SIGINT (Ctrl-C) or SIGTERM stops every process it started, by PID
// (SIGTERM, then SIGKILL after a grace), removes the temporary directory
// and exits 0. Should a process die on its own, tmdemo says which, with
// its last log lines, stops the others and exits 1. On Linux each child
// also gets SIGTERM from the kernel if tmdemo itself is killed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
	"github.com/transmirror/transmirror/probe/api"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Bounds of the start-up and the shutdown.
const (
	readyTimeout = 20 * time.Second // one process until its "started" line
	upTimeout    = 30 * time.Second // the group until every member is up and serving
	stopGrace    = 5 * time.Second  // SIGTERM until SIGKILL
	pollEvery    = 100 * time.Millisecond
)

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tmdemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	binFlag := fs.String("bin", "", "directory holding the built dnsd, mirror and groupctl (default: the directory of tmdemo)")
	var version bool
	buildinfo.Flag(fs, &version)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tmdemo: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if version {
		fmt.Fprintln(stdout, buildinfo.Version("tmdemo"))
		return 0
	}
	bins, err := findBinaries(*binFlag)
	if err != nil {
		fmt.Fprintln(stderr, "tmdemo:", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d := &demo{bins: bins, stdout: stdout, sites: demoSites()}
	err = d.run(ctx)
	// Ctrl-C (or SIGTERM) is the normal way out; anything else is a failure.
	failed := err != nil && (ctx.Err() == nil || !errors.Is(err, context.Canceled))
	if failed {
		fmt.Fprintln(stderr, "tmdemo:", err)
	}
	d.shutdown()
	if failed {
		return 1
	}
	return 0
}

// binaries are the paths of the programs the demo runs.
type binaries struct {
	dnsd, mirror, groupctl string
	// shownGroupctl is groupctl as the printed commands name it.
	shownGroupctl string
}

// findBinaries locates dnsd, mirror and groupctl in dir (default: the
// directory of this executable).
func findBinaries(dir string) (binaries, error) {
	given := dir != ""
	if !given {
		exe, err := os.Executable()
		if err != nil {
			return binaries{}, fmt.Errorf("finding the binaries: %w (give -bin DIR)", err)
		}
		dir = filepath.Dir(exe)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return binaries{}, err
	}
	b := binaries{dnsd: filepath.Join(abs, "dnsd"), mirror: filepath.Join(abs, "mirror"), groupctl: filepath.Join(abs, "groupctl")}
	for _, p := range []string{b.dnsd, b.mirror, b.groupctl} {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			return binaries{}, fmt.Errorf("%s not found: build the commands first (make build, or go build -o DIR/ ./cmd/...) and give -bin DIR", p)
		}
	}
	b.shownGroupctl = filepath.Join(dir, "groupctl")
	if !given {
		// Shorter when it is under the working directory: bin/groupctl.
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, b.groupctl); err == nil && !strings.HasPrefix(rel, "..") {
				b.shownGroupctl = rel
			}
		}
	}
	if !strings.ContainsRune(b.shownGroupctl, filepath.Separator) {
		b.shownGroupctl = "." + string(filepath.Separator) + b.shownGroupctl
	}
	b.shownGroupctl = shellQuote(b.shownGroupctl)
	return b, nil
}

// shellQuote quotes s for sh when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=%@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fixedAddrs are the addresses the demo needs free, with what each is for.
func fixedAddrs(sites []site) []portUse {
	uses := []portUse{
		{"udp", dnsAddr, "dnsd DNS (UDP)"},
		{"tcp", dnsAddr, "dnsd DNS (TCP)"},
		{"tcp", adminAddr, "dnsd admin and dashboard"},
	}
	for _, s := range sites {
		uses = append(uses, portUse{"tcp", net.JoinHostPort(s.IP, httpPort), s.Name + " front end"})
	}
	return uses
}

// portUse is one fixed address and what the demo wants it for.
type portUse struct{ network, addr, what string }

// checkPorts returns an error naming every address of uses that can not
// be bound now.
func checkPorts(uses []portUse) error {
	var errs []error
	for _, u := range uses {
		var c io.Closer
		var err error
		if u.network == "udp" {
			c, err = net.ListenPacket(u.network, u.addr)
		} else {
			c, err = net.Listen(u.network, u.addr)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s (%s) is not available: %w", u.network, u.addr, u.what, err))
			continue
		}
		c.Close()
	}
	if len(errs) > 0 {
		return fmt.Errorf("the demo uses fixed loopback addresses so that the commands it prints stay the same; "+
			"stop whatever holds them (another tmdemo or dnsd -demo?) and try again:\n  %w", errors.Join(errs...))
	}
	return nil
}

// demo is one run: its files and its processes.
type demo struct {
	bins   binaries
	stdout io.Writer
	sites  []site
	lay    layout

	mu       sync.Mutex
	children []*child

	dnsd      *child
	backends  map[string][]string // site → back ends' http://IP:PORT
	frontends map[string]*child
	content   int64
}

// add records a started child, so that shutdown stops it.
func (d *demo) add(c *child) {
	d.mu.Lock()
	d.children = append(d.children, c)
	d.mu.Unlock()
}

// start starts one child and waits until it is ready.
func (d *demo) start(ctx context.Context, name, path string, args []string, readyMsg string) (*child, error) {
	c, err := startChild(name, path, args, filepath.Join(d.lay.Logs, name+".log"), readyMsg)
	if err != nil {
		return nil, err
	}
	d.add(c)
	if err := c.waitReady(ctx, readyTimeout); err != nil {
		return nil, err
	}
	return c, nil
}

// run sets the demo up, prints how to use it and keeps it running until
// ctx is done (it returns ctx.Err()) or a process dies (an error naming it).
func (d *demo) run(ctx context.Context) error {
	if err := checkPorts(fixedAddrs(d.sites)); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "tmdemo-")
	if err != nil {
		return err
	}
	d.lay = newLayout(dir)
	if d.content, err = writeStatic(d.lay, d.sites); err != nil {
		return fmt.Errorf("writing the demo's files: %w", err)
	}

	d.dnsd, err = d.start(ctx, "dnsd", d.bins.dnsd, []string{"-config", filepath.Join(d.lay.Etc, "dnsd.yaml")}, `msg="dnsd started"`)
	if err != nil {
		return err
	}

	if err := d.startBackends(ctx); err != nil {
		return err
	}
	if err := d.startFrontends(ctx); err != nil {
		return err
	}
	if err := d.waitServing(ctx); err != nil {
		return err
	}
	d.printBanner(d.stdout)

	if err := d.watchChildren(ctx); err != nil {
		return err
	}
	return ctx.Err()
}

// startBackends starts every site's back ends, all at once, and notes
// their URLs.
func (d *demo) startBackends(ctx context.Context) error {
	d.backends = make(map[string][]string)
	g, gctx := errgroup.WithContext(ctx)
	var bmu sync.Mutex
	for _, s := range d.sites {
		d.backends[s.Name] = make([]string, len(s.Backends))
		for j := range s.Backends {
			name := s.backendName(j)
			g.Go(func() error {
				c, err := d.start(gctx, name, d.bins.mirror, []string{"-config", filepath.Join(d.lay.Etc, name+".yaml")}, `msg="mirror started"`)
				if err != nil {
					return err
				}
				bmu.Lock()
				d.backends[s.Name][j] = "http://" + c.Addr("http")
				bmu.Unlock()
				return nil
			})
		}
	}
	return g.Wait()
}

// startFrontends writes each site's front-end config over its back ends
// and starts the front ends, all at once.
func (d *demo) startFrontends(ctx context.Context) error {
	d.frontends = make(map[string]*child)
	g, gctx := errgroup.WithContext(ctx)
	var mu sync.Mutex
	for _, s := range d.sites {
		cfg := filepath.Join(d.lay.Etc, s.Name+".yaml")
		if err := os.WriteFile(cfg, []byte(frontendConfig(s, d.backends[s.Name], d.lay.Secret)), 0o644); err != nil {
			return err
		}
		g.Go(func() error {
			c, err := d.start(gctx, s.Name, d.bins.mirror, []string{"-config", cfg}, `msg="mirror started"`)
			if err != nil {
				return err
			}
			mu.Lock()
			d.frontends[s.Name] = c
			mu.Unlock()
			return nil
		})
	}
	return g.Wait()
}

// watchChildren waits until ctx is done (nil) or a process dies on its
// own (an error naming it).
func (d *demo) watchChildren(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	d.mu.Lock()
	children := append([]*child(nil), d.children...)
	d.mu.Unlock()
	for _, c := range children {
		g.Go(func() error {
			select {
			case <-c.done:
				return c.exitError()
			case <-gctx.Done():
				return nil
			}
		})
	}
	return g.Wait()
}

// waitServing polls, until upTimeout, for dnsd to have every member up
// and for every front end to serve through its back ends, so that the
// printed commands work as soon as they are printed.
func (d *demo) waitServing(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	why := ""
	for {
		if why = d.notServing(ctx, client); why == "" {
			return nil
		}
		for _, c := range d.allChildren() {
			if c.exited() {
				return c.exitError()
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("the group was not serving within %s: %s (logs: %s)", upTimeout, why, d.lay.Logs)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (d *demo) allChildren() []*child {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]*child(nil), d.children...)
}

// notServing returns why the group is not serving yet, "" when it is.
func (d *demo) notServing(ctx context.Context, client *http.Client) string {
	c, err := api.NewClient("http://"+adminAddr, api.ClientOptions{HTTP: client})
	if err != nil {
		return "dnsd admin: " + err.Error()
	}
	v, err := c.Group(ctx, groupName)
	if err != nil {
		return "dnsd group view: " + err.Error()
	}
	for _, m := range v.Members {
		if m.State != "up" {
			return fmt.Sprintf("dnsd has member %s %s", m.Name, m.State)
		}
	}
	for _, s := range d.sites {
		u := "http://" + net.JoinHostPort(s.IP, httpPort) + healthPath
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Host = groupName + ":" + httpPort
		resp, err := client.Do(req)
		if err != nil {
			return s.Name + ": " + err.Error()
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("%s answers %s", s.Name, resp.Status)
		}
	}
	return ""
}

// shutdown stops every child by its PID, waits for them and removes the
// temporary directory. It is safe to call whatever run got to.
func (d *demo) shutdown() {
	children := d.allChildren()
	if len(children) > 0 {
		fmt.Fprintf(d.stdout, "\nstopping %d processes ...\n", len(children))
		if killed := stopChildren(children, stopGrace); len(killed) > 0 {
			fmt.Fprintf(d.stdout, "killed (SIGKILL) after %s: %s\n", stopGrace, strings.Join(killed, ", "))
		}
	}
	if d.lay.Dir != "" {
		if err := os.RemoveAll(d.lay.Dir); err != nil {
			fmt.Fprintf(d.stdout, "removing %s: %v\n", d.lay.Dir, err)
			return
		}
		fmt.Fprintf(d.stdout, "stopped; removed %s\n", d.lay.Dir)
	}
}
