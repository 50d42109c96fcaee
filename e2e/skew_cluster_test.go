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

// skewCluster is one dnsd and its mirrors, all on one public port.
type skewCluster struct {
	dnsd    *dnsdProc
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
// directory, starts dnsd, then the mirrors (pushing to dnsd, which accepts
// pushes for its configured members), and waits until dnsd has every
// member up and every mirror has a fresh group view. The mirrors listen
// on 127.0.n.1, 127.0.n+1.1, … where n is the phase's net, so that phases
// side by side do not share an address.
func startSkewCluster(t *testing.T, ph skewPhase) *skewCluster {
	t.Helper()
	dir := t.TempDir()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	var zb, members strings.Builder
	zb.Write(zone)
	zb.WriteString("\n; the skew scenario's mirrors\n")
	ms := make([]*skewMirror, skewMirrors)
	for i := range ms {
		ms[i] = &skewMirror{
			name: fmt.Sprintf("a%d", i+1),
			host: fmt.Sprintf("a%d.mirrors.example.test", i+1),
			ip:   fmt.Sprintf("127.0.%d.1", ph.net+i),
		}
		fmt.Fprintf(&zb, "a%d.mirrors IN A %s\n", i+1, ms[i].ip)
		fmt.Fprintf(&members, "      - {name: %s, host: %s., addresses: [%s], capacity: %g}\n", ms[i].name, ms[i].host, ms[i].ip, skewCapacity)
	}
	writeFile(t, dir, "example.test.zone", zb.String())
	cfg := fmt.Sprintf(`# e2e skew: four mirrors of equal capacity, one per answer, an adaptive TTL.
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
health: {interval: 500ms, timeout: 400ms, jitter: 50ms, rise: 2, fall: 3}
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: %d, max: %d}
    answers: 1
    policy: {name: geo-load, low_watermark: %g, high_watermark: %g}
    secret: %s
    members:
%s`, skewGroup, skewTTLMin, skewTTLMax, skewLow, skewHigh, skewSecret, members.String())
	writeFile(t, dir, "dnsd.yaml", cfg)
	d := startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml"))

	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "pool"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "pool"), "file.bin", strings.Repeat("x", skewFileSize))

	cl := &skewCluster{dnsd: d, mirrors: ms}
	// The first mirror picks the port; the others must get the same one on
	// their own addresses.
	cl.port, _ = onePort(t, len(ms), func(i int, port string) (*proc, string, error) {
		p, http, admin, err := launchSkewMirror(t, dir, ms[i], port, d.Admin, ph.correct)
		if err == nil {
			ms[i].proc, ms[i].admin = p, admin
		}
		return p, http, err
	})

	upAt := time.Now()
	probetest.Until(t, 15*time.Second, func() string {
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
			return fmt.Sprintf("dnsd has %d of %d members up: %+v", up, skewMirrors, v.Members)
		}
		upAt = time.Now()
		return ""
	})
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

// launchSkewMirror writes m's config and starts the real mirror on m.ip
// and port ("0": any). It returns an error, rather than failing the test,
// when the process exits before it is ready (a port already taken).
func launchSkewMirror(t *testing.T, dir string, m *skewMirror, port, dnsdAdmin string, correct bool) (p *proc, http, admin string, err error) {
	t.Helper()
	cfg := fmt.Sprintf(`listen: ["%s"]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s
dnsd: {url: "http://%s", secret: %q, push_interval: 250ms, view_interval: 250ms}
root: root
capacity: %g
run_queue: none
redirect: {enabled: %t, max_share: %g}
`, net.JoinHostPort(m.ip, port), skewGroup, m.name, m.host, dnsdAdmin, skewSecret, skewCapacity, correct, skewMaxShare)
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
