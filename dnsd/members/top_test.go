package members_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/probe"
)

// TestViewTopAndRescued: the group view's top sums the members' pushed
// tops (most requested first), each member shows its rescued count, and
// a member's last report in the view leaves its top out.
func TestViewTopAndRescued(t *testing.T) {
	cfg := testenv.Config("") + `      - {name: nyc1, host: nyc1.example.org., addresses: [10.0.1.2], capacity: 1000}
`
	e := startCtl(t, t.TempDir(), cfg)
	now := time.Now()
	pushes := []struct {
		member  string
		top     []probe.PathCount
		rescued uint64
	}{
		{"fra1", []probe.PathCount{{Path: "/debian/ls-lR.gz", Count: 5}, {Path: "/iso/a.iso", Count: 2}}, 7},
		{"nyc1", []probe.PathCount{{Path: "/iso/a.iso", Count: 4}, {Path: "/README", Count: 1}}, 0},
	}
	for _, p := range pushes {
		b, err := json.Marshal(probe.Report{Group: "www.example.org.", Member: p.member, Seq: 1, Time: now.Add(-time.Second),
			R: 1, Load: probe.LoadOf(1, 0), Capacity: 1000, Top: p.top, Rescued: p.rescued})
		if err != nil {
			t.Fatal(err)
		}
		path := "/v1/groups/www.example.org./members/" + p.member + "/load"
		if code, body := e.call("POST", path, b, []byte(testenv.Secret), now); code != http.StatusAccepted {
			t.Fatalf("push of %s: %d %s", p.member, code, body)
		}
	}
	v, err := e.ctl.View("www.example.org")
	if err != nil {
		t.Fatal(err)
	}
	want := []probe.PathCount{{Path: "/iso/a.iso", Count: 6}, {Path: "/debian/ls-lR.gz", Count: 5}, {Path: "/README", Count: 1}}
	if !reflect.DeepEqual(v.Top, want) {
		t.Errorf("group top %v, want %v", v.Top, want)
	}
	for i, m := range v.Members {
		t.Run(m.Name, func(t *testing.T) {
			if m.Rescued != pushes[i].rescued {
				t.Errorf("rescued %d, want %d", m.Rescued, pushes[i].rescued)
			}
			if m.LastReport == nil || m.LastReport.Top != nil || m.LastReport.Rescued != pushes[i].rescued {
				t.Errorf("last report %+v, want one without top, rescued %d", m.LastReport, pushes[i].rescued)
			}
		})
	}
}
