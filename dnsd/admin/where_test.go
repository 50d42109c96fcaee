package admin

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var whereT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// viewMembership serves one group view; the rest of Membership is not used.
type viewMembership struct {
	Membership
	v api.GroupView
}

func (m viewMembership) View(group string) (api.GroupView, error) {
	if group != m.v.Name && group+"." != m.v.Name {
		return api.GroupView{}, fmt.Errorf("%w: %s", zones.ErrUnknownGroup, group)
	}
	return m.v, nil
}

type fixedContents contentmap.Lookup

func (f fixedContents) Lookup(string, string) contentmap.Lookup { return contentmap.Lookup(f) }

// orderExplainer picks members in a fixed order.
type orderExplainer []string

func (o orderExplainer) Explain(group string, _ uint16, _ netip.Addr, _ netip.Prefix) (api.Explanation, error) {
	return api.Explanation{Group: group, Answer: o[:1], Members: []api.ExplainedMember{{Name: "fra1"}, {Name: "nyc1"}, {Name: "sfo1"}, {Name: "ams1"}}}, nil
}

func whereFixture() (api.GroupView, contentmap.Lookup) {
	old, fresh := whereT0.Add(-time.Hour), whereT0
	v := api.GroupView{Name: "www.example.org.", Members: []api.MemberView{
		{MemberInfo: api.MemberInfo{Name: "fra1", Host: "fra1.example.org"}, State: "up", Generation: whereT0, Lag: 0},
		{MemberInfo: api.MemberInfo{Name: "nyc1", Host: "nyc1.example.org"}, State: "up", Generation: whereT0.Add(-time.Hour), Lag: 3600},
		{MemberInfo: api.MemberInfo{Name: "sfo1", Host: "sfo1.example.org"}, State: "lagging"},
		{MemberInfo: api.MemberInfo{Name: "ams1", Host: "ams1.example.org.", Location: api.LocationView{Country: "NL"}}, State: "up",
			LastReport: &probe.Report{Schemes: []string{"http", "https"}}}, // listed as https, with its country
		{MemberInfo: api.MemberInfo{Name: "push1", Host: "push1.example.org"}, State: "unknown"},
	}}
	lk := contentmap.Lookup{
		Copies: map[string]content.Copy{
			"fra1": {Size: 20, ModTime: fresh}, "nyc1": {Size: 10, ModTime: old}, "ams1": {Size: 20, ModTime: fresh},
		},
		Indexed: map[string]bool{"fra1": true, "nyc1": true, "sfo1": true, "ams1": true},
	}
	return v, lk
}

func TestWhereRoutes(t *testing.T) {
	v, lk := whereFixture()
	mux := http.NewServeMux()
	(&whereAPI{m: viewMembership{v: v}, c: fixedContents(lk), ex: orderExplainer{"ams1"}, now: func() time.Time { return whereT0 }}).register(mux)
	nobody := http.NewServeMux()
	(&whereAPI{m: viewMembership{v: v}, c: fixedContents{}, now: func() time.Time { return whereT0 }}).register(nobody)
	tests := []struct {
		name, url, accept string
		mux               *http.ServeMux
		status            int
		golden            string // under testdata, "" for none
	}{
		{"where", "/v1/groups/www.example.org/where?path=/pool//main/a.deb", "", mux, 200, "where.json"},
		{"where nobody", "/v1/groups/www.example.org/where?path=/pool/a.deb", "", nobody, 200, "where_nobody.json"},
		{"dot dot", "/v1/groups/www.example.org/where?path=/pool/../etc/passwd", "", mux, 400, "where_dotdot.json"},
		{"relative", "/v1/groups/www.example.org/where?path=pool/a.deb", "", mux, 400, ""},
		{"NUL", "/v1/groups/www.example.org/where?path=/a%00b", "", mux, 400, ""},
		{"mirrorlist text", "/v1/groups/www.example.org/mirrorlist?path=/pool/main/a.deb", "", mux, 200, "mirrorlist.txt"},
		{"mirrorlist metalink", "/v1/groups/www.example.org/mirrorlist?path=/pool/main/a.deb", api.MediaMetalink, mux, 200, "mirrorlist.meta4"},
		{"mirrorlist format", "/v1/groups/www.example.org/mirrorlist?path=/pool/main/a.deb&format=metalink", "", mux, 200, "mirrorlist.meta4"},
		{"unknown group", "/v1/groups/ftp.example.org/where?path=/pool/a.deb", "", mux, 404, ""},
		{"mirrorlist nobody", "/v1/groups/www.example.org/mirrorlist?path=/pool/a.deb", "", nobody, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tt.url, nil)
			req.RemoteAddr = "192.0.2.1:5353"
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			rec := httptest.NewRecorder()
			tt.mux.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.golden != "" {
				golden(t, tt.golden, rec.Body.Bytes())
			}
		})
	}
}

// golden compares got with testdata/name, rewriting it with -update; JSON
// is indented first, so that the file reads.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	if filepath.Ext(name) == ".json" {
		var b bytes.Buffer
		if err := json.Indent(&b, got, "", "  "); err != nil {
			t.Fatal(err)
		}
		got = b.Bytes()
	}
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", p, got, want)
	}
}
