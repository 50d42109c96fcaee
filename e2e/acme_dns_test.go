package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// ACME DNS-01 through dnsd (issue 24, the server side): a member asks the
// real dnsd over the signed admin API to serve
// "_acme-challenge.NAME TXT VALUE" and the real dig sees it.

// acmeValue is a well-formed challenge value: the base64url SHA-256 of s,
// as an ACME client makes of its key authorization.
func acmeValue(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// challengeTXT is the TXT values that d serves at _acme-challenge.name
// (UDP, or TCP with tcp), sorted, and the status; it fails the test for a
// reply without AA or a TTL other than 10.
func challengeTXT(t *testing.T, d *dnsdProc, name string, tcp bool) ([]string, string) {
	t.Helper()
	args := []string{"_acme-challenge." + name, "TXT", "+norec"}
	if tcp {
		args = append(args, "+tcp")
	}
	r := d.Dig(t, args...)
	var out []string
	for _, a := range r.Answer {
		if a.Type != "TXT" {
			continue
		}
		if !r.Flags["aa"] || a.TTL != 10 {
			t.Errorf("challenge answer without aa or with TTL %d:\n%s", a.TTL, r.Raw)
		}
		out = append(out, strings.Trim(a.Data, `"`))
	}
	slices.Sort(out)
	return out, r.Status
}

// waitChallenge waits until d serves exactly want at _acme-challenge.name.
func waitChallenge(t *testing.T, d *dnsdProc, name string, want ...string) {
	t.Helper()
	slices.Sort(want)
	probetest.Until(t, 10*time.Second, func() string {
		got, status := challengeTXT(t, d, name, false)
		if !slices.Equal(got, want) {
			return fmt.Sprintf("%s serves %q (%s), want %q", name, got, status, want)
		}
		return ""
	})
}

// statusOf is the HTTP status of a client error, 200 for none.
func statusOf(err error) int {
	var se *api.StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	if err != nil {
		return -1
	}
	return http.StatusOK
}

// TestACMEChallenges: members publish values for the group's name and a
// member's host, dig sees all of them (UDP and TCP, AA, TTL 10); a DELETE
// makes one go; a name the member is not entitled to is 403 and never
// served; a member that leaves loses its values; a flood is 429 and
// bounded.
func TestACMEChallenges(t *testing.T) {
	const secret, group = "e2e-group-secret", "www.example.test"
	d := startMembersDNSD(t, t.TempDir())
	c, err := api.NewClient("http://"+d.Admin, api.ClientOptions{Secret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.AddMember(ctx, group, api.MemberInfo{Name: "fra1", Host: "fra1.mirrors.example.test.", Addresses: []string{"127.0.1.1"}, Capacity: 100}); err != nil {
		t.Fatal(err)
	}
	sin, fra, host := acmeValue("sin1 www"), acmeValue("fra1 www"), acmeValue("fra1 host")
	for _, p := range []struct{ member, name, value string }{{"sin1", group, sin}, {"fra1", group + ".", fra}} {
		if out, err := c.PublishChallenge(ctx, group, p.member, api.ACMEChallenge{Name: p.name, Value: p.value}); err != nil || !out.Expires.After(time.Now()) {
			t.Fatalf("publish %s %s: %+v %v", p.member, p.name, out, err)
		}
	}
	// The operator's groupctl, signed as fra1, for fra1's host.
	if out, err := groupctl(t, d.Admin, secret, "acme", "publish", group, "fra1", "fra1.mirrors.example.test", host); err != nil || !strings.Contains(out, "until") {
		t.Fatalf("groupctl acme publish: %v\n%s", err, out)
	}
	waitChallenge(t, d, group, sin, fra)
	if out, err := groupctl(t, d.Admin, "", "acme", "list"); err != nil || strings.Count(out, "_acme-challenge.") != 3 || !strings.Contains(out, host) {
		t.Errorf("groupctl acme list: %v\n%s", err, out)
	}
	if got, _ := challengeTXT(t, d, group, true); !slices.Equal(got, []string{sin, fra}) && !slices.Equal(got, []string{fra, sin}) {
		t.Errorf("over TCP: %q", got)
	}
	waitChallenge(t, d, "fra1.mirrors.example.test", host)

	if r, err := c.RemoveChallenge(ctx, group, "sin1", api.ACMEChallenge{Name: group, Value: sin}); err != nil || !r.Removed {
		t.Fatalf("remove: %+v %v", r, err)
	}
	waitChallenge(t, d, group, fra)

	for _, p := range []struct{ member, name string }{
		{"sin1", "fra1.mirrors.example.test"}, // another member's host
		{"sin1", "mail.example.test"},         // a name of the zone that is no member's
		{"sin1", "www.example.net"},           // outside the zones
	} {
		_, err := c.PublishChallenge(ctx, group, p.member, api.ACMEChallenge{Name: p.name, Value: sin})
		if statusOf(err) != http.StatusForbidden {
			t.Errorf("publish %s for %s: %v, want 403", p.member, p.name, err)
		}
	}
	if got, status := challengeTXT(t, d, "mail.example.test", false); len(got) != 0 || status != "NXDOMAIN" {
		t.Errorf("a forbidden name is served: %q %s", got, status)
	}
	if got, _ := challengeTXT(t, d, "fra1.mirrors.example.test", false); !slices.Equal(got, []string{host}) {
		t.Errorf("fra1's host serves %q", got)
	}

	if _, err := c.RemoveMember(ctx, group, "fra1"); err != nil {
		t.Fatal(err)
	}
	waitChallenge(t, d, group)
	waitChallenge(t, d, "fra1.mirrors.example.test")

	acmeFlood(t, d, c, group)
}

// acmeFlood: 40 publishes of sin1 at once, each a new value: a few are
// published (its burst, at most 4 live), the rest are 429; the values
// served stay bounded.
func acmeFlood(t *testing.T, d *dnsdProc, c *api.Client, group string) {
	t.Helper()
	codes := map[int]int{}
	for i := range 40 {
		_, err := c.PublishChallenge(context.Background(), group, "sin1", api.ACMEChallenge{Name: group, Value: acmeValue(fmt.Sprint("flood ", i))})
		codes[statusOf(err)]++
	}
	if codes[http.StatusTooManyRequests] < 30 || codes[http.StatusOK] > 4 || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 40 {
		t.Errorf("flood: status counts %v", codes)
	}
	if got, _ := challengeTXT(t, d, group, false); len(got) > 4 || len(got) != codes[http.StatusOK] {
		t.Errorf("after the flood %d values are served (%d published): %q", len(got), codes[http.StatusOK], got)
	}
	list, err := c.Challenges(context.Background())
	if err != nil || len(list.Challenges) != codes[http.StatusOK] {
		t.Errorf("live challenges: %+v %v", list, err)
	}
	text := scrape(t, d.Admin)
	for r, atLeast := range map[string]float64{"published": 3, "removed": 1, "forbidden": 3, "limited": 30} {
		if got := metricSum(text, "transmirror_dnsd_acme_challenges_total", `result="`+r+`"`); got < atLeast {
			t.Errorf("acme_challenges_total{result=%q} = %g, want ≥ %g", r, got, atLeast)
		}
	}
	t.Logf("flood of 40: %v", codes)
}

// TestACMEChallengesNSSet: in an NS set of two nodes through a real etcd,
// a value published on node 1 is served by node 2, and removed on node 2
// it goes from node 1.
func TestACMEChallengesNSSet(t *testing.T) {
	s := startNSSet(t, 2)
	waitDegraded(t, s.nodes, 0, 10*time.Second)
	v := acmeValue("static1 www")
	start := time.Now()
	if _, err := s.client(t, 0).PublishChallenge(context.Background(), nssetGroup, "static1", api.ACMEChallenge{Name: nssetGroup, Value: v}); err != nil {
		t.Fatal(err)
	}
	waitChallenge(t, s.nodes[1], nssetGroup, v)
	t.Logf("published on node 1, served by node 2 after %v", time.Since(start).Round(time.Millisecond))
	if _, err := s.client(t, 1).RemoveChallenge(context.Background(), nssetGroup, "static1", api.ACMEChallenge{Name: nssetGroup, Value: v}); err != nil {
		t.Fatal(err)
	}
	waitChallenge(t, s.nodes[0], nssetGroup)
}
