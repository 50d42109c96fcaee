package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startGeoDNSD starts dnsd with three regions and the committed test mmdb.
func startGeoDNSD(t *testing.T) *dnsdProc {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []struct{ src, dst string }{
		{filepath.Join("testdata", "geo.yaml"), "dnsd.yaml"},
		{filepath.Join("testdata", "example.test.zone"), "example.test.zone"},
		{filepath.Join("..", "scheduler", "geo", "testdata", "regions.mmdb"), "regions.mmdb"},
	} {
		data, err := os.ReadFile(f.src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, f.dst, string(data))
	}
	return startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml"))
}

var e2eRegion = map[string]string{
	"127.0.1.1": "EU", "127.0.1.2": "EU", "127.0.2.1": "NA", "127.0.2.2": "NA", "127.0.3.1": "AS", "127.0.3.2": "AS",
	"fd00:1::1": "EU", "fd00:1::2": "EU", "fd00:2::1": "NA", "fd00:2::2": "NA",
}

// TestDigClientSubnet asks the real dnsd with the real dig +subnet=…: each
// region's subnet gets its region's mirrors, and the ECS option comes back
// with a scope.
func TestDigClientSubnet(t *testing.T) {
	d := startGeoDNSD(t)
	cases := []struct {
		name   string
		args   []string
		region string
		ecs    string // prefix expected in the reply's CLIENT-SUBNET, "" for none
	}{
		{"EU subnet", []string{"+subnet=198.51.100.0/24", "www.example.test", "A"}, "EU", "198.51.100.0/24/"},
		{"NA subnet", []string{"+subnet=203.0.113.0/24", "www.example.test", "A"}, "NA", "203.0.113.0/24/"},
		{"AS subnet", []string{"+subnet=192.0.2.0/24", "www.example.test", "A"}, "AS", "192.0.2.0/24/"},
		{"a /32 is truncated to its /24", []string{"+subnet=192.0.2.77/32", "www.example.test", "A"}, "AS", "192.0.2.77/32/"},
		{"EU over IPv6", []string{"+subnet=2001:db8:1::/48", "www.example.test", "AAAA"}, "EU", "2001:db8:1::/48/"},
		{"NA over IPv6", []string{"+subnet=2001:db8:2::/48", "www.example.test", "AAAA"}, "NA", "2001:db8:2::/48/"},
		{"no ECS from 127.0.0.1: the configured default (NA), no option", []string{"www.example.test", "A"}, "NA", ""},
		{"CNAME into the group keeps the client's region", []string{"+subnet=192.0.2.0/24", "docs.example.test", "A"}, "AS", "192.0.2.0/24/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for range 5 {
				r := d.Dig(t, tc.args...)
				if r.Status != "NOERROR" {
					t.Fatalf("status %q:\n%s", r.Status, r.Raw)
				}
				var addrs []string
				for _, x := range r.Answer {
					if x.Type == "A" || x.Type == "AAAA" {
						addrs = append(addrs, x.Data)
					}
				}
				if len(addrs) != 2 {
					t.Fatalf("want 2 addresses, got %v:\n%s", addrs, r.Raw)
				}
				for _, a := range addrs {
					if e2eRegion[a] != tc.region {
						t.Fatalf("answer %v: %s is in %q, want %s:\n%s", addrs, a, e2eRegion[a], tc.region, r.Raw)
					}
				}
				got := ""
				if r.EDNS != nil {
					got = r.EDNS.Options["CLIENT-SUBNET"]
				}
				switch {
				case tc.ecs == "" && got != "":
					t.Fatalf("no ECS sent, but the reply has CLIENT-SUBNET %q", got)
				case tc.ecs != "" && !strings.HasPrefix(got, tc.ecs):
					t.Fatalf("CLIENT-SUBNET %q, want %s<scope>:\n%s", got, tc.ecs, r.Raw)
				case tc.ecs != "" && strings.HasSuffix(got, "/0"):
					t.Fatalf("CLIENT-SUBNET %q: the answer depended on the subnet, scope must not be 0", got)
				}
			}
		})
	}
}

// TestGroupctlExplain runs the real groupctl against the real dnsd.
func TestGroupctlExplain(t *testing.T) {
	d := startGeoDNSD(t)
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin("groupctl"), append([]string{"-server", "http://" + d.Admin}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := run("explain", "www.example.test", "-client", "127.0.0.1", "-ecs", "192.0.2.0/24")
	if err != nil {
		t.Fatalf("groupctl explain: %v\n%s", err, out)
	}
	for _, want := range []string{"policy geo-load", "ECS 192.0.2.0/24 (used)", "mmdb", "SG AS", "MEMBER", "sin1", "kul1", "fra1"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	answerLine := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "answer:") {
			answerLine = l
		}
	}
	if !strings.Contains(answerLine, "sin1") && !strings.Contains(answerLine, "kul1") {
		t.Errorf("explain answer line %q, want the AS members", answerLine)
	}
	out, err = run("-o", "json", "explain", "www.example.test", "-client", "203.0.113.9")
	if err != nil || !strings.Contains(out, `"source":"mmdb"`) || !strings.Contains(out, `"country":"US"`) {
		t.Errorf("explain -o json: %v\n%s", err, out)
	}
	out, err = run("explain", "nope.example.test", "-client", "127.0.0.1")
	if err == nil || !strings.Contains(out, "404") {
		t.Errorf("explain of an unknown group must fail with 404: %v\n%s", err, out)
	}
	out, err = run("explain", "www.example.test", "-client", "not-an-ip")
	if err == nil || !strings.Contains(out, "want an IP address") {
		t.Errorf("explain with a bad client must say so: %v\n%s", err, out)
	}
}
