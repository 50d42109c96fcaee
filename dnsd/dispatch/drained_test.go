package dispatch

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/zones"
)

// TestWhenAllDrained: with every member of the asked family drained, a
// group answers with them (fail open) by default, and with no address
// (NODATA) when it has when_all_drained: nodata; the explanation says
// so. The families are apart: only fra1 and nyc1 have IPv6 addresses.
func TestWhenAllDrained(t *testing.T) {
	all := []string{"fra1", "ams1", "nyc1", "sfo1", "sin1", "tyo1"}
	tests := []struct {
		name          string
		nodata        bool
		drained       []string
		wantA, wantV6 bool // addresses in the A, AAAA answers
	}{
		{"default, all drained", false, all, true, true},
		{"nodata, all drained", true, all, false, false},
		{"nodata, the IPv6 members drained", true, []string{"fra1", "nyc1"}, true, false},
		{"nodata, one left", true, all[1:], true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set := dispatchSet(t, "geo-load")
			if tc.nodata {
				set = withKey(t, "    when_all_drained: nodata\n")
			}
			d, err := New(Options{Registry: prometheus.NewRegistry(), Now: time.Now, Seed: 42})
			if err != nil {
				t.Fatal(err)
			}
			commit, err := d.Prepare(set, map[string][]string{"www.example.org.": tc.drained})
			if err != nil {
				t.Fatal(err)
			}
			commit()
			for _, q := range []struct {
				qtype uint16
				want  bool
			}{{dns.TypeA, tc.wantA}, {dns.TypeAAAA, tc.wantV6}} {
				ans, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: q.qtype, Client: resolver})
				if err != nil {
					t.Fatal(err)
				}
				if got := len(ans.Addrs) > 0; got != q.want {
					t.Errorf("%s: addresses %v, want some: %v", dns.TypeToString[q.qtype], ans.Addrs, q.want)
				}
				e, err := d.Explain("www.example.org", q.qtype, resolver, netip.Prefix{})
				if err != nil {
					t.Fatal(err)
				}
				if nodata := strings.Contains(e.Why, "NODATA"); nodata == q.want || (len(e.Addresses) > 0) != q.want {
					t.Errorf("%s: explained %v, %q", dns.TypeToString[q.qtype], e.Addresses, e.Why)
				}
			}
		})
	}
}

// withKey is dispatchSet's config with the group keys given (indented
// lines) and the geo-load policy.
func withKey(t *testing.T, keys string) *zones.Set {
	t.Helper()
	dir := t.TempDir()
	mmdb, err := filepath.Abs(filepath.Join("..", "..", "scheduler", "geo", "testdata", "regions.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), []byte(dispatchZone), 0o644); err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("MMDB", mmdb, "POLICY", "geo-load", "CAP", "100000", "BW", "0",
		"    answers: 1\n", "    answers: 1\n"+keys).Replace(dispatchConfig)
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if set.Group("www.example.org").WhenAllDrained != zones.WhenAllDrainedNoData {
		t.Fatal("the config has no when_all_drained: nodata")
	}
	return set
}
