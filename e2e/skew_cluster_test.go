package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/probe/probetest"
)

// skewMirror is one mirror process of the scenario.
type skewMirror struct {
	*proc
	name  string
	host  string // its own host name
	ip    string // its public address (the port is the cluster's)
	admin string // admin host:port
}

// skewCluster is one dnsd, or the nodes of an NS set, and the mirrors,
// all on one public port.
type skewCluster struct {
	dnsd    []*dnsdProc // one, or the NS set's nodes
	port    string
	mirrors []*skewMirror
}

// index returns the index of the mirror at ip, -1 if none is.
func (cl *skewCluster) index(ip string) int {
	for i, m := range cl.mirrors {
		if m.ip == ip {
			return i
		}
	}
	return -1
}

// startSkewCluster writes the zone and dnsd config into a new temporary
// directory, starts dnsd (ph.nodes of them, an NS set sharing a real etcd,
// when more than one), then the mirrors (pushing to every dnsd, which
// accept pushes for their configured members), and waits until every dnsd
// has every member up and every mirror has a fresh group view. The mirrors
// listen on 127.0.n.1, 127.0.n+1.1, … where n is the phase's net, so that
// phases side by side do not share an address. Nothing sets an interval or
// a law key: dnsd's health checks, the mirrors' pushes and views, and the
// correction's watermarks and max_share are the defaults.
func startSkewCluster(t *testing.T, ph skewPhase) *skewCluster {
	t.Helper()
	dir := t.TempDir()
	ms := make([]*skewMirror, skewMirrors)
	for i := range ms {
		ms[i] = &skewMirror{
			name: fmt.Sprintf("a%d", i+1),
			host: fmt.Sprintf("a%d.mirrors.example.test", i+1),
			ip:   fmt.Sprintf("127.0.%d.1", ph.net+i),
		}
	}
	cl := &skewCluster{dnsd: startSkewDNSD(t, ph, ms), mirrors: ms}
	var urls []string
	for _, d := range cl.dnsd {
		urls = append(urls, `"http://`+d.Admin+`"`)
	}

	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "pool"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "pool"), "file.bin", strings.Repeat("x", skewFileSize))

	// The first mirror picks the port; the others must get the same one on
	// their own addresses.
	cl.port, _ = onePort(t, len(ms), func(i int, port string) (*proc, string, error) {
		p, http, admin, err := launchSkewMirror(t, dir, ms[i], port, strings.Join(urls, ", "), ph.correct)
		if err == nil {
			ms[i].proc, ms[i].admin = p, admin
		}
		return p, http, err
	})
	upAt := cl.waitUp(t)
	// Every mirror must have fetched a view since: one with every sibling up.
	probetest.Until(t, 10*time.Second, func() string {
		for _, m := range ms {
			text, err := metrics(m.admin)
			if err != nil {
				return err.Error()
			}
			at := metricSum(text, "transmirror_mirror_view_last_success_timestamp_seconds")
			if at < float64(upAt.UnixNano())/1e9 {
				return fmt.Sprintf("mirror %s has no group view newer than the moment all were up", m.name)
			}
		}
		return ""
	})
	return cl
}

// startSkewDNSD starts the phase's dnsd: one, or ph.nodes nodes of an NS
// set (ns1, ns2, …) that share a real etcd on loopback. Each has its own
// directory with the zone, which names the mirrors' host names.
func startSkewDNSD(t *testing.T, ph skewPhase, ms []*skewMirror) []*dnsdProc {
	t.Helper()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	var zb, members strings.Builder
	zb.Write(zone)
	zb.WriteString("\n; the skew scenario's mirrors\n")
	for i, m := range ms {
		fmt.Fprintf(&zb, "a%d.mirrors IN A %s\n", i+1, m.ip)
		fmt.Fprintf(&members, "      - {name: %s, host: %s., addresses: [%s], capacity: %g}\n", m.name, m.host, m.ip, skewCapacity)
	}
	var etcd string
	if ph.nodes > 1 {
		etcd = etcdtest.Start(t).Endpoint()
	}
	var nodes []*dnsdProc
	for n := 1; n <= max(ph.nodes, 1); n++ {
		dir := t.TempDir()
		writeFile(t, dir, "example.test.zone", zb.String())
		cluster := ""
		if etcd != "" {
			cluster = fmt.Sprintf("cluster:\n  node: ns%d\n  etcd: {endpoints: [%q], prefix: /e2e-skew/}\n", n, etcd)
		}
		cfg := fmt.Sprintf(`# e2e skew: four mirrors of equal capacity, one per answer, an adaptive TTL.
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
%szones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: %d, max: %d}
    answers: 1
    policy: {name: %s}
    secret: %s
    members:
%s`, cluster, skewGroup, skewTTLMin, skewTTLMax, ph.policy, skewSecret, members.String())
		nodes = append(nodes, startDNSD(t, true, "-config", writeFile(t, dir, "dnsd.yaml", cfg)))
	}
	return nodes
}

// waitUp waits until every dnsd has every member up and returns when
// that was first seen.
func (cl *skewCluster) waitUp(t *testing.T) time.Time {
	t.Helper()
	upAt := time.Now()
	probetest.Until(t, 20*time.Second, func() string {
		for i, d := range cl.dnsd {
			var v struct {
				Members []struct {
					Name  string `json:"name"`
					State string `json:"state"`
				} `json:"members"`
			}
			if err := skewGetJSON("http://"+d.Admin+"/v1/groups/"+skewGroup, &v); err != nil {
				return err.Error()
			}
			up := 0
			for _, m := range v.Members {
				if m.State == "up" {
					up++
				}
			}
			if up != skewMirrors {
				return fmt.Sprintf("dnsd %d has %d of %d members up: %+v", i+1, up, skewMirrors, v.Members)
			}
		}
		upAt = time.Now()
		return ""
	})
	return upAt
}

// launchSkewMirror writes m's config and starts the real mirror on m.ip
// and port ("0": any), pushing to and fetching its view from dnsdURLs (a
// YAML flow list's items). It returns an error, rather than failing the test,
// when the process exits before it is ready (a port already taken).
func launchSkewMirror(t *testing.T, dir string, m *skewMirror, port, dnsdURLs string, correct bool) (p *proc, http, admin string, err error) {
	t.Helper()
	cfg := fmt.Sprintf(`listen: ["%s"]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s
dnsd: {urls: [%s], secret: %q}
root: root
capacity: %g
run_queue: none
redirect: {enabled: %t}
`, net.JoinHostPort(m.ip, port), skewGroup, m.name, m.host, dnsdURLs, skewSecret, skewCapacity, correct)
	mp, err := launchMirror(t, writeFile(t, dir, m.name+".yaml", cfg), m.name)
	if err != nil {
		return nil, "", "", fmt.Errorf("on %s: %w", net.JoinHostPort(m.ip, port), err)
	}
	return mp.proc, mp.HTTP, mp.Admin, nil
}

// runQueue returns the mean m the mirrors report (0 with run_queue: none).
func (cl *skewCluster) runQueue(t *testing.T) float64 {
	t.Helper()
	sum := 0.0
	for _, m := range cl.mirrors {
		var r struct {
			M *float64 `json:"m"`
		}
		if err := skewGetJSON("http://"+m.admin+"/v1/load", &r); err != nil || r.M == nil {
			t.Fatalf("mirror %s: load report: %v (m %v)", m.name, err, r.M)
		}
		sum += *r.M
	}
	return sum / float64(len(cl.mirrors))
}

// skewResolver is one recursive resolver of the population: it asks dnsd

// skewGet fetches url (loopback only) and returns the body.
func skewGet(u string) (string, error) { return getBody(loopbackClient, u) }

// loopbackClient is for the admin URLs of the processes a test started:
// no proxy, every request bounded.
var loopbackClient = &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 5 * time.Second}

// getBody fetches u with c and returns the body of a 200, else an error
// that names u, the status and the body.
func getBody(c *http.Client, u string) (string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return string(body), nil
}

func skewGetJSON(u string, v any) error {
	body, err := skewGet(u)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
