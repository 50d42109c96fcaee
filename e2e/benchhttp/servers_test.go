package benchhttp

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// frontEnd is one front end of the comparison.
type frontEnd struct {
	key   string // its name in -frontends
	label string // its name in the table
	// ref is the key of the HAProxy front end whose figures of the same
	// round its ratios are taken against ("" for a reference itself).
	ref string
	// close: the clients ask for a new connection with every request
	// (handoff: after a handoff the connection is the back end's).
	close bool
	// byPath: the front end picks a back end by the path, so a path
	// goes to the same back end every time.
	byPath bool
	// mirrors: the back ends are mirrors (handoff needs them), not nginx.
	mirrors bool
}

// frontEnds are all the front ends, in the order of the table.
var frontEnds = []frontEnd{
	{key: "haproxy-rr", label: "HAProxy roundrobin"},
	{key: "haproxy-uri", label: "HAProxy balance uri", byPath: true},
	{key: "nginx-rr", label: "nginx round robin", ref: "haproxy-rr"},
	{key: "nginx-hash", label: "nginx hash $request_uri", ref: "haproxy-uri", byPath: true},
	{key: "mirror-wrr", label: "mirror proxy wrr", ref: "haproxy-rr"},
	{key: "mirror-lard", label: "mirror proxy lard", ref: "haproxy-uri", byPath: true},
	{key: "haproxy-rr-close", label: "HAProxy roundrobin, new conn", close: true},
	{key: "mirror-handoff", label: "mirror handoff wrr, new conn", ref: "haproxy-rr-close", close: true, mirrors: true},
}

// site is a running front end and the back ends behind it.
type site struct {
	frontEnd
	url      string // http://HOST:PORT
	pid      int    // the front end (its children are counted with it)
	backends []int  // the back ends' PIDs
}

// servers starts what the front ends of fes need: the two nginx back
// ends, the two mirror back ends and each front end, all on -server-cpu,
// each waited for until it serves the 4 KiB file.
func servers(b *testing.B, dir, root string, fes []frontEnd) []*site {
	b.Helper()
	var nginxBE, mirrorBE []*proc
	var nginxAddrs []string
	var mirrorList []siteBackend
	var sites []*site
	for _, fe := range fes {
		if fe.mirrors && mirrorBE == nil {
			mirrorBE, mirrorList = startMirrorBackends(b, dir, root)
		}
		if !fe.mirrors && nginxBE == nil {
			nginxBE, nginxAddrs = startNginxBackends(b, dir, root)
		}
		s := &site{frontEnd: fe}
		p, addr := startFrontEnd(b, filepath.Join(dir, fe.key), fe, nginxAddrs, mirrorList)
		s.url, s.pid = "http://"+addr, p.pid
		bes := nginxBE
		if fe.mirrors {
			bes = mirrorBE
		}
		for _, be := range bes {
			s.backends = append(s.backends, be.pid)
		}
		waitHTTP(b, p, s.url+smallPath)
		sites = append(sites, s)
	}
	return sites
}

// startFrontEnd starts fe in dir over the nginx back ends at nginxAddrs
// or the mirror back ends of mirrorList and returns it and its address.
func startFrontEnd(b *testing.B, dir string, fe frontEnd, nginxAddrs []string, mirrorList []siteBackend) (*proc, string) {
	b.Helper()
	mkdir(b, dir)
	cfg := filepath.Join(dir, "fe.yaml")
	switch fe.key {
	case "haproxy-rr", "haproxy-rr-close":
		return startHAProxy(b, dir, "roundrobin", nginxAddrs)
	case "haproxy-uri":
		return startHAProxy(b, dir, "uri", nginxAddrs)
	case "nginx-rr", "nginx-hash":
		return startNginx(b, fe.key, dir, func(addr string) string {
			return nginxFrontendConfig(dir, nginxUser(b), addr, fe.byPath, nginxAddrs)
		})
	case "mirror-wrr", "mirror-lard":
		var list []siteBackend
		for i, a := range nginxAddrs {
			list = append(list, siteBackend{name: fmt.Sprintf("be%d", i+1), addr: a})
		}
		return startMirror(b, *flagMirror, *flagServerCPU, fe.key, cfg, mirrorFrontendConfig("proxy", strings.TrimPrefix(fe.key, "mirror-"), list))
	case "mirror-handoff":
		return startMirror(b, *flagMirror, *flagServerCPU, fe.key, cfg, mirrorFrontendConfig("handoff", "wrr", mirrorList))
	}
	b.Fatalf("front end %q: not known", fe.key)
	return nil, ""
}

// startNginxBackends starts the two nginx back ends serving root.
func startNginxBackends(b *testing.B, dir, root string) ([]*proc, []string) {
	b.Helper()
	var ps []*proc
	var addrs []string
	for i := range 2 {
		name := fmt.Sprintf("be%d", i+1)
		sub := filepath.Join(dir, "nginx-"+name)
		mkdir(b, sub)
		p, addr := startNginx(b, "nginx "+name, sub, func(addr string) string {
			return nginxBackendConfig(sub, nginxUser(b), addr, root, name)
		})
		ps, addrs = append(ps, p), append(addrs, addr)
	}
	return ps, addrs
}

// startMirrorBackends starts the two mirror back ends serving root, each
// taking handed-off connections on a socket of its own.
func startMirrorBackends(b *testing.B, dir, root string) ([]*proc, []siteBackend) {
	b.Helper()
	socks := socketDir(b)
	var ps []*proc
	var list []siteBackend
	for i := range 2 {
		name := fmt.Sprintf("be%d", i+1)
		sock := filepath.Join(socks, name)
		p, addr := startMirror(b, *flagMirror, *flagServerCPU, "mirror "+name, filepath.Join(dir, "mirror-"+name+".yaml"),
			mirrorBackendConfig(name, root, sock))
		waitHTTP(b, p, "http://"+addr+smallPath)
		ps, list = append(ps, p), append(list, siteBackend{name: name, addr: addr, sock: sock})
	}
	return ps, list
}

// startNginx starts nginx in dir on a free port, its config cfg(addr).
func startNginx(b *testing.B, name, dir string, cfg func(addr string) string) (*proc, string) {
	b.Helper()
	path := filepath.Join(dir, "nginx.conf")
	return startFree(b, name, func(addr string) *proc {
		if err := os.WriteFile(path, []byte(cfg(addr)), 0o644); err != nil {
			b.Fatal(err)
		}
		return startPinned(b, name, *flagServerCPU, nil, *flagNginx, "-e", "stderr", "-p", dir, "-c", path)
	})
}

// startHAProxy starts HAProxy in the foreground in dir on a free port,
// balance balance over the back ends.
func startHAProxy(b *testing.B, dir, balance string, backends []string) (*proc, string) {
	b.Helper()
	path := filepath.Join(dir, "haproxy.cfg")
	name := "haproxy " + balance
	return startFree(b, name, func(addr string) *proc {
		if err := os.WriteFile(path, []byte(haproxyConfig(addr, balance, backends)), 0o644); err != nil {
			b.Fatal(err)
		}
		return startPinned(b, name, *flagServerCPU, nil, *flagHAProxy, "-db", "-f", path)
	})
}

// nginxUser is nginx's user line: the benchmark's own user and group
// when it runs as root, else "" (nginx then runs as its caller).
func nginxUser(b *testing.B) string {
	b.Helper()
	if os.Geteuid() != 0 {
		return ""
	}
	u, err := user.Current()
	if err != nil {
		b.Fatal(err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil {
		b.Fatal(err)
	}
	return fmt.Sprintf("user %s %s;", u.Username, g.Name)
}

// socketDir returns a short directory for the back ends' handoff
// sockets (a Unix socket path has room for about 100 bytes, more than a
// benchmark's temporary directory may leave), removed at the end.
func socketDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "tmh")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// mkdir makes dir or fails.
func mkdir(b *testing.B, dir string) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
}
