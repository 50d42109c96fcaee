package members_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/internal/testenv"
)

// strictConfig is testenv.Config without allow_private and with at most
// max run-time members.
func strictConfig(max string) string {
	return strings.Replace(testenv.Config(""), "    allow_private: true\n", "    max_runtime_members: "+max+"\n", 1)
}

// TestGroupAddValidation: GROUP-ADD refuses what could point clients at
// someone else's or an internal address, with a 4xx that names the
// field, and changes nothing; the cap on run-time members is a 409.
func TestGroupAddValidation(t *testing.T) {
	e := startCtl(t, t.TempDir(), strictConfig("2"))
	const path = "/v1/groups/www.example.org./members"
	add := func(name, addrs string, extra string) []byte {
		return []byte(`{"name":"` + name + `","host":"` + name + `.example.org.","addresses":[` + addrs + `],"capacity":10` + extra + `}`)
	}
	tests := []struct {
		name     string
		body     []byte
		wantCode int
		wantBody string
	}{
		{"global unicast", add("new1", `"192.0.3.1","2a00:1450::1"`, ""), http.StatusCreated, `"name":"new1"`},
		{"multicast", add("x1", `"224.0.0.1"`, ""), http.StatusBadRequest, `addresses[0]: address 224.0.0.1 is not a unicast address`},
		{"unspecified", add("x1", `"192.0.3.2","0.0.0.0"`, ""), http.StatusBadRequest, `addresses[1]: address 0.0.0.0 is not a unicast address`},
		{"broadcast", add("x1", `"255.255.255.255"`, ""), http.StatusBadRequest, `addresses[0]: address 255.255.255.255 is not a unicast address`},
		{"loopback", add("x1", `"127.0.0.1"`, ""), http.StatusBadRequest, `addresses[0]: 127.0.0.1 is loopback (the group does not allow_private)`},
		{"private", add("x1", `"10.0.0.3"`, ""), http.StatusBadRequest, `addresses[0]: 10.0.0.3 is private (RFC 1918)`},
		{"unique local", add("x1", `"fd00::3"`, ""), http.StatusBadRequest, `addresses[0]: fd00::3 is private (unique local)`},
		{"link-local", add("x1", `"169.254.169.254"`, ""), http.StatusBadRequest, `addresses[0]: 169.254.169.254 is link-local`},
		{"bad host name", []byte(`{"name":"x1","host":"x1.example.org/evil","addresses":["192.0.3.2"],"capacity":10}`), http.StatusBadRequest, `host: \"x1.example.org/evil\" is not a host name`},
		{"capacity too large", []byte(`{"name":"x1","host":"x1.example.org.","addresses":["192.0.3.2"],"capacity":1e12}`), http.StatusBadRequest, `member \"x1\": capacity: 1e+12 is above 1e+09`},
		{"weight too large", add("x1", `"192.0.3.2"`, `,"weight":1e6`), http.StatusBadRequest, `weight: 1e+06 is above 1000`},
		{"probe on loopback", add("x1", `"192.0.3.2"`, `,"probe":"http://127.0.0.1:9100/v1/load"`), http.StatusBadRequest, `probe: 127.0.0.1 is loopback`},
		{"host is the group's name", []byte(`{"name":"x1","host":"WWW.example.org","addresses":["192.0.3.2"],"capacity":10}`), http.StatusBadRequest, `member \"x1\": host: \"WWW.example.org\" is the group's own name: redirects to it would loop`},
		{"second member", add("new2", `"192.0.3.3"`, ""), http.StatusCreated, `"name":"new2"`},
		{"over the cap", add("new3", `"192.0.3.4"`, ""), http.StatusConflict, `too many run-time members: the group has 2, max_runtime_members is 2`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.call("POST", path, tc.body, []byte(testenv.Secret), time.Now())
			if code != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Errorf("%d %s; want %d with %q", code, body, tc.wantCode, tc.wantBody)
			}
		})
	}
	v, _ := e.ctl.View("www.example.org.")
	var names []string
	for _, m := range v.Members {
		names = append(names, m.Name)
	}
	if got := strings.Join(names, " "); got != "fra1 new1 new2" {
		t.Errorf("members %s, want fra1 new1 new2", got)
	}
}

// TestStateAfterStricterConfig: run-time members that a new config no
// longer allows (allow_private turned off, a lower max_runtime_members)
// are not served but stay in the state file, and come back when the
// config allows them again.
func TestStateAfterStricterConfig(t *testing.T) {
	dir := t.TempDir()
	e := startCtl(t, dir, testenv.Config(""))
	for _, b := range []string{
		`{"name":"priv1","host":"priv1.example.org.","addresses":["10.0.1.2"],"capacity":10}`,
		`{"name":"pub1","host":"pub1.example.org.","addresses":["192.0.3.1"],"capacity":10}`,
		`{"name":"pub2","host":"pub2.example.org.","addresses":["192.0.3.2"],"capacity":10}`,
	} {
		if code, out := e.call("POST", "/v1/groups/www.example.org./members", []byte(b), []byte(testenv.Secret), time.Now()); code != http.StatusCreated {
			t.Fatalf("GROUP-ADD: %d %s", code, out)
		}
	}
	served := func() string {
		v, _ := e.ctl.View("www.example.org.")
		var names []string
		for _, m := range v.Members {
			names = append(names, m.Name)
		}
		return strings.Join(names, " ")
	}
	stored := func() string {
		data, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Members map[string][]struct{ Name string }
		}
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range st.Members["www.example.org."] {
			names = append(names, m.Name)
		}
		return strings.Join(names, " ")
	}
	steps := []struct {
		name, config, served string
	}{
		{"allow_private off", strictConfig("64"), "fra1 pub1 pub2"},
		{"cap of one", strictConfig("1"), "fra1 pub1"},
		{"allowed again", testenv.Config(""), "fra1 priv1 pub1 pub2"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if err := e.reload(s.config); err != nil {
				t.Fatal(err)
			}
			if got := served(); got != s.served {
				t.Errorf("served %q, want %q", got, s.served)
			}
			if got := stored(); got != "priv1 pub1 pub2" {
				t.Errorf("state file holds %q, want all three", got)
			}
		})
	}
}
