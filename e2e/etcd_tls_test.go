package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/cluster/etcdtest"
	"github.com/transmirror/transmirror/probe/probetest"
)

// etcd for real (docs/etcd.md): the NS set's etcd with client TLS,
// client-certificate auth and RBAC on, and dnsd nodes that reach it with
// cluster.etcd's ca_file, cert_file, key_file, username and a password
// from a file, as the docs' layout has it.

// etcdTLSPrefix is the prefix the etcd user's role is granted.
const etcdTLSPrefix = "/e2e-tls/"

// etcdAccess is how one dnsd node reaches the secure etcd.
type etcdAccess struct {
	prefix   string // cluster.etcd.prefix
	password string // the password file's content
	noCert   bool   // no cert_file and key_file
}

// startTLSNode starts dnsd node ns<i> of an NS set on the secure etcd e
// (its server certificate from ca), with access a; the TLS files and the
// password file sit beside the config, which names them relative to it.
func startTLSNode(t *testing.T, e *etcdtest.Server, ca *probetest.CA, i int, a etcdAccess) *dnsdProc {
	t.Helper()
	dir := t.TempDir()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "example.test.zone", string(zone))
	copyFile(t, ca.File, filepath.Join(dir, "etcd-ca.crt"))
	tlsLines := "    ca_file: etcd-ca.crt\n"
	if !a.noCert {
		cert, key := e.ClientCert(t, fmt.Sprintf("ns%d", i))
		copyFile(t, cert, filepath.Join(dir, "etcd-client.crt"))
		copyFile(t, key, filepath.Join(dir, "etcd-client.key"))
		tlsLines += "    cert_file: etcd-client.crt\n    key_file: etcd-client.key\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd.password"), []byte(a.password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e NS set node %[1]d on a secure etcd
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
state_file: state.json
server: {identity: ns%[1]d.example.test, nsid: ns%[1]d}
health: {interval: 300ms, timeout: 250ms, jitter: 30ms}
cluster:
  node: ns%[1]d
  etcd:
    endpoints: ["%[2]s"]
    prefix: %[3]s
%[4]s    username: %[5]s
    password: {file: etcd.password}
    request_timeout: 2s
    dial_timeout: 3s
    lease_ttl: 3s
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %[6]s.
    ttl: {min: 1, max: 1}
    answers: 8
    secret: %[7]s
    allow_private: true # run-time members on loopback
    members:
      - {name: static1, host: static1.example.test., addresses: [127.0.10.1], capacity: 1000}
`, i, e.Endpoint(), a.prefix, tlsLines, etcdtest.User, nssetGroup, faultSecret))
	return startDNSD(t, true, "-config", cfg)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestEtcdTLS: two dnsd nodes share their run-time state through an etcd
// that serves TLS only, requires a client certificate and has auth on,
// as a user whose role may read and write the deployment's prefix only:
// a GROUP-ADD through ns1 is answered by ns2, a drain through ns2 leaves
// ns1's answers, and the keys are under the prefix. A node that etcd
// refuses (a wrong password, no client certificate, a prefix outside its
// role's grant) starts, degraded, and says why: in its log, its
// /v1/dashboard and the 503 of a refused membership change.
func TestEtcdTLS(t *testing.T) {
	t.Parallel()
	ca := probetest.NewCA(t, t.TempDir(), "etcd-ca")
	e := etcdtest.StartSecure(t, etcdtest.Secure{CA: ca, Prefix: etcdTLSPrefix})
	granted := etcdAccess{prefix: etcdTLSPrefix, password: e.Password()}
	nodes := []*dnsdProc{startTLSNode(t, e, ca, 1, granted), startTLSNode(t, e, ca, 2, granted)}
	waitDegraded(t, nodes, 0, 10*time.Second)

	t.Run("add through ns1 answered by ns2", func(t *testing.T) {
		if out, err := nssetAdd(t, nodes[0], "fra1", "127.0.20.1"); err != nil {
			t.Fatalf("groupctl add on ns1: %v\n%s", err, out)
		}
		t.Logf("add on ns1 answered by both in %v", waitAnswered(t, nodes, "127.0.20.1", true, 3*time.Second))
	})
	t.Run("drain through ns2 leaves ns1's answers", func(t *testing.T) {
		if out, err := groupctl(t, nodes[1].Admin, faultSecret, "drain", nssetGroup, "fra1"); err != nil {
			t.Fatalf("groupctl drain on ns2: %v\n%s", err, out)
		}
		t.Logf("drain on ns2 out of both in %v", waitAnswered(t, nodes, "127.0.20.1", false, 3*time.Second))
	})
	t.Run("keys under the prefix", func(t *testing.T) {
		out, err := e.Ctl("get", etcdTLSPrefix, "--prefix", "--keys-only")
		if err != nil {
			t.Fatalf("etcdctl get: %v\n%s", err, out)
		}
		for _, key := range []string{"groups/" + nssetGroup, "nodes/ns1", "nodes/ns2"} {
			if !strings.Contains(out, etcdTLSPrefix+key) {
				t.Errorf("etcd has no %s%s under the prefix; keys:\n%s", etcdTLSPrefix, key, out)
			}
		}
	})
	t.Run("refused", func(t *testing.T) { testEtcdRefused(t, e, ca) })
}

// testEtcdRefused starts one node per way that etcd refuses it and checks
// that it starts degraded and says why.
func testEtcdRefused(t *testing.T, e *etcdtest.Server, ca *probetest.CA) {
	for i, tc := range []struct {
		name string
		a    etcdAccess
		why  string // in the log, the dashboard and the 503
	}{
		{"wrong password", etcdAccess{prefix: etcdTLSPrefix, password: "not-" + e.Password()},
			"authentication failed, invalid user ID or password"},
		{"no client certificate", etcdAccess{prefix: etcdTLSPrefix, password: e.Password(), noCert: true},
			"remote error: tls: "},
		{"prefix outside the grant", etcdAccess{prefix: "/e2e-other/", password: e.Password()},
			"permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := startTLSNode(t, e, ca, 11+i, tc.a)
			probetest.Until(t, 10*time.Second, func() string { return refusedWhyNot(t, d, tc.why) })
			for line := range strings.SplitSeq(d.Logs(), "\n") {
				if strings.Contains(line, "at start") {
					t.Logf("dnsd says: %s", line)
				}
			}
			if v, err := metric(d.Admin, "transmirror_dnsd_cluster_resyncs_total"); err != nil || v != 0 {
				t.Errorf("resyncs %v (%v), want 0: a refused node never read the shared state", v, err)
			}
		})
	}
}

// refusedWhyNot is why node d does not (yet) say that etcd refuses it
// for why: degraded 1, why in its log and its dashboard's cluster error,
// and a membership change refused with a 503 that says it.
func refusedWhyNot(t *testing.T, d *dnsdProc, why string) string {
	if v, err := degraded(d); err != nil || v != 1 {
		return fmt.Sprintf("degraded %v (%v), want 1", v, err)
	}
	if !strings.Contains(d.Logs(), why) {
		return fmt.Sprintf("log does not say %q:\n%s", why, d.Logs())
	}
	var dash struct {
		Cluster *struct {
			Degraded bool   `json:"degraded"`
			Error    string `json:"error"`
		} `json:"cluster"`
	}
	if err := getJSON("http://"+d.Admin+"/v1/dashboard", &dash); err != nil {
		return err.Error()
	}
	if dash.Cluster == nil || !dash.Cluster.Degraded || !strings.Contains(dash.Cluster.Error, why) {
		return fmt.Sprintf("dashboard's cluster %+v, want degraded with an error saying %q", dash.Cluster, why)
	}
	out, err := nssetAdd(t, d, "fra9", "127.0.20.9")
	if err == nil || !strings.Contains(out, "503") || !strings.Contains(out, why) {
		return fmt.Sprintf("add: %v\n%s\nwant a 503 saying %q", err, out, why)
	}
	return ""
}

// getJSON decodes the JSON body of a GET of u.
func getJSON(u string, v any) error {
	resp, err := metricsClient.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return jsonDecode(resp.Body, v)
}
