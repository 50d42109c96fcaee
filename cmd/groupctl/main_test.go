package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the output")

const testSecret = "group-secret"

func ptr(f float64) *float64 { return &f }

// testView is the group view the fake dnsd answers.
func testView() api.GroupView {
	t := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	rep := probe.Report{Group: "www.example.org.", Member: "fra1", Seq: 7, Time: t.Add(-2 * time.Second),
		R: 30, M: 0.5, Conns: 3, BytesPerSecond: 1e6, RedirectsPerSecond: 1, Load: 305, Capacity: 1000, Rescued: 12,
		Schemes: []string{probe.SchemeHTTP, probe.SchemeHTTPS}}
	return api.GroupView{
		Name: "www.example.org.", Policy: "geo-load", Answers: 2, Time: t,
		TTL:        api.TTLView{Min: 20, Max: 300},
		Watermarks: api.Watermarks{Low: 0.7, High: 0.9}, MaxLag: 3600,
		Top: []probe.PathCount{{Path: "/debian/dists/stable/InRelease", Count: 41.5}, {Path: "/iso/a%20b.iso", Count: 3}},
		Members: []api.MemberView{
			{
				MemberInfo: api.MemberInfo{Name: "fra1", Host: "fra1.mirrors.example.org.", Addresses: []string{"192.0.2.10", "2001:db8::10"},
					Location: api.LocationView{Lat: ptr(50.11), Lon: ptr(8.68), Country: "DE", Continent: "EU"}, Capacity: 1000, Bandwidth: 1.25e6},
				Source: "config", State: "up", Since: t.Add(-time.Hour),
				Load: 305, Reported: rep.Time, Pending: 20, Utilization: 0.8, LoadUtilization: 0.325, BandwidthUtilization: 0.8, BytesPerSecond: 1e6,
				LastReport: &rep, ReportAge: 2, AnswerShare: 0.75, CapacityShare: 0.667,
				Generation: t.Add(-30 * time.Minute), Rescued: 12,
			},
			{
				MemberInfo: api.MemberInfo{Name: "nyc1", Host: "nyc1.mirrors.example.org.", Addresses: []string{"192.0.2.30"},
					Location: api.LocationView{Country: "US", Continent: "NA"}, Capacity: 500},
				Source: "config", State: "lagging", Generation: t.Add(-150 * time.Minute), Lag: 7200,
			},
			{
				MemberInfo: api.MemberInfo{Name: "ams1", Host: "ams1.mirrors.example.org.", Addresses: []string{"192.0.2.20"},
					Location: api.LocationView{Country: "NL", Continent: "EU"}, Capacity: 500, Weight: 2, Joined: true},
				Source: "runtime", State: "unknown", AnswerShare: 0.25, CapacityShare: 0.333,
			},
		},
	}
}

// fakeDNSD answers the groups API with fixed data; writes must be signed
// with testSecret (replays are not refused).
func fakeDNSD(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
	}
	signed := func(h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			// Stateless: the -o json cases repeat a request within its second.
			if err := api.VerifyRequest(r, body, []byte(testSecret), time.Now(), 0); err != nil {
				reply(w, http.StatusUnauthorized, api.ErrorReply{Error: err.Error()})
				return
			}
			h(w, r, body)
		}
	}
	group := func(w http.ResponseWriter, r *http.Request) bool {
		if g := r.PathValue(api.GroupParam); g != "www.example.org" && g != "www.example.org." {
			reply(w, http.StatusNotFound, api.ErrorReply{Error: "dnsd: unknown group: " + g})
			return false
		}
		return true
	}
	mux.HandleFunc(api.ListGroups.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.GroupList{Groups: []api.GroupSummary{
			{Name: "www.example.org.", Policy: "geo-load", Members: 2, Up: 1},
			{Name: "ftp.example.org.", Policy: "wrr", Members: 1, FailOpen: true},
		}})
	})
	mux.HandleFunc(api.GetGroup.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		if group(w, r) {
			reply(w, http.StatusOK, testView())
		}
	})
	mux.HandleFunc(api.ExplainGroup.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		if !group(w, r) {
			return
		}
		q := r.URL.Query()
		if q.Get(api.ClientParam) != "198.51.100.7" {
			reply(w, http.StatusBadRequest, api.ErrorReply{Error: fmt.Sprintf("client %q: want an IP address", q.Get(api.ClientParam))})
			return
		}
		reply(w, http.StatusOK, api.Explanation{
			Group: "www.example.org.", Policy: "geo-load", Qtype: q.Get(api.QtypeParam), Client: "198.51.100.7", ECS: q.Get(api.ECSParam),
			ClientPrefix: "198.51.100.0/24", Location: api.LocationView{Lat: ptr(48.86), Lon: ptr(2.35), Country: "FR", Continent: "EU"},
			Source: "mmdb", ECSUse: "used", Scope: 24, TTL: 60,
			Answer: []string{"fra1"}, Addresses: []string{"192.0.2.10"},
			Members: []api.ExplainedMember{
				{Name: "fra1", State: "up", DistanceKm: 479.4, Load: 305, Pending: 20, Capacity: 1000, Weight: 1, Utilization: 0.33, Picked: true, Note: "nearest <0.7",
					Serves: []string{"http", "https", "IPv4", "IPv6"}},
				{Name: "ams1", State: "unknown", DistanceKm: 430.1, Capacity: 500, Weight: 2, Note: "no report", Serves: []string{"http", "IPv4"}},
			},
			Why: "nearest member below the low watermark (utilization < 0.70)", Watermarks: api.Watermarks{Low: 0.7, High: 0.9},
			Redirects: &api.RedirectFilter{Family: "IPv4", HTTP: []string{"fra1", "ams1"}, HTTPS: []string{"fra1"},
				Excluded: []api.ExcludedMember{{Name: "ams1", From: []string{"https"}, Reason: "no https in its reports"}}},
		})
	})
	mux.HandleFunc(api.GroupWhere.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		if !group(w, r) {
			return
		}
		if p := r.URL.Query().Get(api.PathParam); !strings.HasPrefix(p, "/") {
			reply(w, http.StatusBadRequest, api.ErrorReply{Error: fmt.Sprintf("path %q: must start with / (want a URL path such as /dists/stable/InRelease)", p)})
			return
		}
		at := time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC)
		reply(w, http.StatusOK, api.Where{Group: "www.example.org.", Path: r.URL.Query().Get(api.PathParam), Time: at.Add(time.Hour),
			Holders: []api.WhereMember{
				{Name: "fra1", Host: "fra1.mirrors.example.org.", Size: 2048, ModTime: at, Best: true, State: "up", Generation: at.Add(30 * time.Minute)},
				{Name: "nyc1", Host: "nyc1.mirrors.example.org.", Size: 1024, ModTime: at.Add(-24 * time.Hour), State: "lagging", Generation: at.Add(-90 * time.Minute), Lag: 7200},
			},
			Lacking: []string{}, Unknown: []string{"ams1"}})
	})
	mux.HandleFunc(api.AddMember.Pattern(), signed(func(w http.ResponseWriter, r *http.Request, body []byte) {
		var info api.MemberInfo
		if err := json.Unmarshal(body, &info); err != nil {
			reply(w, http.StatusBadRequest, api.ErrorReply{Error: err.Error()})
			return
		}
		reply(w, http.StatusCreated, info)
	}))
	mux.HandleFunc(api.RemoveMember.Pattern(), signed(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if r.PathValue(api.MemberParam) == "fra1" {
			reply(w, http.StatusConflict, api.ErrorReply{Error: "dnsd: member from the config file: fra1"})
			return
		}
		reply(w, http.StatusOK, api.Removed{Removed: r.PathValue(api.MemberParam)})
	}))
	for _, rt := range []api.Route{api.DrainMember, api.UndrainMember} {
		mux.HandleFunc(rt.Pattern(), signed(func(w http.ResponseWriter, r *http.Request, _ []byte) {
			reply(w, http.StatusOK, api.Drained{Drained: rt == api.DrainMember, Member: r.PathValue(api.MemberParam)})
		}))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestCommands runs each command against the fake dnsd and compares what
// it prints, and its exit code, with testdata/NAME.golden.
func TestCommands(t *testing.T) {
	srv := fakeDNSD(t)
	tests := []struct {
		name   string
		secret string // $TRANSMIRROR_SECRET
		args   []string
	}{
		{"list", "", []string{"list"}},
		{"list-json", "", []string{"-o", "json", "list"}},
		{"status", "", []string{"status", "www.example.org"}},
		{"status-json", "", []string{"-o", "json", "status", "www.example.org."}},
		{"status-unknown-group", "", []string{"status", "ftp.example.org"}},
		{"where", "", []string{"where", "www.example.org", "/dists/stable/InRelease"}},
		{"where-json", "", []string{"where", "www.example.org", "/dists/stable/InRelease", "-json"}},
		{"where-bad-path", "", []string{"where", "www.example.org", "dists/stable/InRelease"}},
		{"where-usage", "", []string{"where", "www.example.org"}},
		{"explain", "", []string{"explain", "www.example.org", "-client", "198.51.100.7", "-ecs", "198.51.100.0/24"}},
		{"explain-json", "", []string{"-o", "json", "explain", "www.example.org", "-client", "198.51.100.7", "-type", "AAAA"}},
		{"explain-bad-client", "", []string{"explain", "www.example.org", "-client", "not-an-ip"}},
		{"add", testSecret, []string{"add", "www.example.org", "-name", "par1", "-host", "par1.mirrors.example.org.",
			"-addr", "192.0.2.30, 2001:db8::30", "-capacity", "800", "-lat", "48.86", "-lon", "2.35", "-country", "FR", "-continent", "EU"}},
		{"add-json", testSecret, []string{"-o", "json", "add", "www.example.org", "-name", "par1", "-host", "par1.mirrors.example.org.",
			"-addr", "192.0.2.30", "-capacity", "800", "-bandwidth", "1Gbit/s", "-probe", "http://192.0.2.30:9180/v1/load"}},
		{"add-bad-bandwidth", testSecret, []string{"add", "www.example.org", "-name", "par1", "-bandwidth", "1 Gigabit"}},
		{"add-without-secret", "", []string{"add", "www.example.org", "-name", "par1"}},
		{"remove", testSecret, []string{"remove", "www.example.org", "ams1"}},
		{"remove-json", testSecret, []string{"-o", "json", "remove", "www.example.org", "ams1"}},
		{"remove-static", testSecret, []string{"remove", "www.example.org", "fra1"}},
		{"remove-wrong-secret", "not-the-secret", []string{"remove", "www.example.org", "ams1"}},
		{"drain", testSecret, []string{"drain", "www.example.org", "fra1"}},
		{"drain-json", testSecret, []string{"-o", "json", "drain", "www.example.org", "fra1"}},
		{"undrain", testSecret, []string{"undrain", "www.example.org", "fra1"}},
		{"undrain-json", testSecret, []string{"-o", "json", "undrain", "www.example.org", "fra1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TRANSMIRROR_SECRET", tt.secret)
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"-server", srv.URL}, tt.args...), &stdout, &stderr)
			got := fmt.Sprintf("exit %d\n-- stdout --\n%s-- stderr --\n%s", code, stdout.String(), stderr.String())
			got = strings.ReplaceAll(got, srv.URL, "http://DNSD")
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (go test -update to accept):\n--- got\n%s\n--- want\n%s", golden, got, want)
			}
		})
	}
}

// TestCAFile: against an admin API with a certificate of a private CA,
// groupctl fails without -ca-file and succeeds with it.
func TestCAFile(t *testing.T) {
	plain := fakeDNSD(t)
	srv := httptest.NewUnstartedServer(plain.Config.Handler)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"system roots only", []string{"-server", srv.URL, "list"}, 1, "certificate"},
		{"with the CA", []string{"-server", srv.URL, "-ca-file", ca, "list"}, 0, ""},
		{"CA file missing", []string{"-server", srv.URL, "-ca-file", filepath.Join(dir, "none.crt"), "list"}, 2, "none.crt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("TRANSMIRROR_CA", "")
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code || !strings.Contains(stderr.String(), tt.err) {
				t.Errorf("exit %d, stderr %q; want %d with %q", code, stderr.String(), tt.code, tt.err)
			}
		})
	}
}
