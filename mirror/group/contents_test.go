package group

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/contentmap"
)

// fakeMap is a ContentMap whose copies the test sets; a Refresh makes
// the copies in later visible, as a fetch of a sibling's index would.
type fakeMap struct {
	mu        sync.Mutex
	copies    map[string]map[string]content.Copy // path → member → copy
	later     map[string]map[string]content.Copy
	indexed   map[string]bool
	refreshes int
}

func (f *fakeMap) Lookup(group, p string) contentmap.Lookup {
	f.mu.Lock()
	defer f.mu.Unlock()
	lk := contentmap.Lookup{Copies: map[string]content.Copy{}, Indexed: f.indexed}
	for m, c := range f.copies[p] {
		lk.Copies[m] = c
	}
	return lk
}

func (f *fakeMap) Refresh(ctx context.Context, group string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshes++
	for p, cs := range f.later {
		f.copies[p] = cs
	}
	f.later = nil
}

// fakeFiles is this mirror's files, path → copy.
type fakeFiles map[string]content.Copy

func (f fakeFiles) Stat(escapedPath string) (int64, time.Time, bool) {
	c, ok := f[strings.TrimPrefix(escapedPath, "/")]
	return c.Size, c.ModTime, ok
}

// TestRedirectorContents drives ServeHTTP with the siblings' copies
// known: a mirror below its target serves what it holds, rescues what it
// lacks or holds an older copy of to a sibling with the best copy (once,
// on the sibling's own name), asks the siblings again before it answers
// 404, and a dispatcher answers 404 for a file that no member holds.
func TestRedirectorContents(t *testing.T) {
	old, fresh := content.Copy{Size: 10, ModTime: t0}, content.Copy{Size: 12, ModTime: t0.Add(time.Hour)}
	member := RedirectRules{Group: "www.example.org", Host: "fra1.mirrors.example.org", Enabled: true, Law: LawWatermark,
		LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1}
	dispatcher := RedirectRules{Group: "www.example.org", Host: "d.example.org", Dispatcher: true}
	tests := []struct {
		name          string
		rules         RedirectRules
		mine          fakeFiles
		copies, later map[string]map[string]content.Copy
		status        int
		target        string // the Location's host, for 302
		refreshes     int
	}{
		{"held here: served", member, fakeFiles{"f": fresh}, map[string]map[string]content.Copy{"f": {"ams1": fresh}}, nil, 200, "", 0},
		{"lacked here: rescued", member, fakeFiles{}, map[string]map[string]content.Copy{"f": {"nyc1": fresh}}, nil, 302, "nyc1.mirrors.example.org", 0},
		{"older here: rescued to the newer", member, fakeFiles{"f": old}, map[string]map[string]content.Copy{"f": {"ams1": old, "nyc1": fresh}}, nil, 302, "nyc1.mirrors.example.org", 0},
		{"newer here: served", member, fakeFiles{"f": fresh}, map[string]map[string]content.Copy{"f": {"ams1": old}}, nil, 200, "", 0},
		{"nobody: asked again, then 404", member, fakeFiles{}, nil, nil, 404, "", 1},
		{"appeared since: found on asking again", member, fakeFiles{}, nil, map[string]map[string]content.Copy{"f": {"ams1": fresh}}, 302, "ams1.mirrors.example.org", 1},
		{"dispatcher: to a holder", dispatcher, nil, map[string]map[string]content.Copy{"f": {"nyc1": fresh}}, nil, 302, "nyc1.mirrors.example.org", 0},
		{"dispatcher: nobody is 404", dispatcher, nil, nil, nil, 404, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			self := ""
			if !tt.rules.Dispatcher {
				self = "fra1"
			}
			fm := &fakeMap{copies: tt.copies, later: tt.later, indexed: map[string]bool{"fra1": true, "ams1": true, "nyc1": true}}
			if fm.copies == nil {
				fm.copies = map[string]map[string]content.Copy{}
			}
			o := RedirectorOptions{Rules: tt.rules, View: &staticView{snapshot(t, testView(nil), self)}, Contents: fm,
				Clock: func() time.Time { return t0 }, Rand: rand.New(rand.NewPCG(1, 1))}
			if !tt.rules.Dispatcher {
				o.Next = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if _, ok := tt.mine[strings.TrimPrefix(r.URL.Path, "/")]; !ok {
						http.NotFound(w, r)
					}
				})
				o.Load, o.Files = fixedUtilization(0.1), tt.mine
			}
			rd, err := NewRedirector(o)
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			rd.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://www.example.org/f", nil))
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			if loc := w.Header().Get("Location"); tt.target != "" && !strings.HasPrefix(loc, "http://"+tt.target+"/f") {
				t.Errorf("Location %q, want one on %s", loc, tt.target)
			}
			if fm.refreshes != tt.refreshes {
				t.Errorf("%d refreshes of the siblings' indexes, want %d", fm.refreshes, tt.refreshes)
			}
		})
	}
}

// listedURL is a URL of a mirror list, text or Metalink, and its host.
var listedURL = regexp.MustCompile(`http://([a-z0-9.]+)/pool/f\.deb`)

// TestRedirectorMirrorList: ?mirrorlist on any mirror lists the holders of
// the best copy, this mirror first when it holds it, then the candidates
// in the policy's order, as text or, asked so, Metalink; a file nobody
// holds, or a path that names none, is a 404.
func TestRedirectorMirrorList(t *testing.T) {
	old, fresh := content.Copy{Size: 10, ModTime: t0}, content.Copy{Size: 12, ModTime: t0.Add(time.Hour)}
	member := RedirectRules{Group: "www.example.org", Host: "fra1.mirrors.example.org", Enabled: true, Law: LawWatermark,
		LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1}
	dispatcher := RedirectRules{Group: "www.example.org", Host: "d.example.org", Dispatcher: true}
	copies := map[string]map[string]content.Copy{"pool/f.deb": {"ams1": fresh, "nyc1": old}}
	tests := []struct {
		name, target, accept string
		rules                RedirectRules
		mine                 fakeFiles
		status               int
		want                 []string // the URLs' hosts, in order
		media                string
	}{
		{"text, self first", "/pool/f.deb?mirrorlist", "", member, fakeFiles{"pool/f.deb": fresh}, 200,
			[]string{"fra1", "ams1"}, "text/plain; charset=utf-8"},
		{"an older copy here is not listed", "/pool/f.deb?mirrorlist", "", member, fakeFiles{"pool/f.deb": old}, 200,
			[]string{"ams1"}, "text/plain; charset=utf-8"},
		{"metalink by Accept", "/pool/f.deb?mirrorlist", "application/metalink4+xml", member, fakeFiles{}, 200,
			[]string{"ams1"}, "application/metalink4+xml"},
		{"metalink by the parameter", "/pool/f.deb?mirrorlist=metalink", "", dispatcher, nil, 200,
			[]string{"ams1"}, "application/metalink4+xml"},
		{"nobody holds it", "/pool/g.deb?mirrorlist", "", member, fakeFiles{}, 404, nil, ""},
		{"not a file", "/?mirrorlist", "", member, fakeFiles{}, 404, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fm := &fakeMap{copies: copies, indexed: map[string]bool{"fra1": true, "ams1": true, "nyc1": true}}
			self := ""
			if !tt.rules.Dispatcher {
				self = "fra1"
			}
			o := RedirectorOptions{Rules: tt.rules, View: &staticView{snapshot(t, testView(nil), self)}, Contents: fm,
				Clock: func() time.Time { return t0 }, Rand: rand.New(rand.NewPCG(1, 1))}
			if !tt.rules.Dispatcher {
				o.Next, o.Load, o.Files = http.NotFoundHandler(), fixedUtilization(0.1), tt.mine
			}
			rd, err := NewRedirector(o)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "http://www.example.org"+tt.target, nil)
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			w := httptest.NewRecorder()
			rd.ServeHTTP(w, req)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.status != 200 {
				return
			}
			if ct := w.Header().Get("Content-Type"); ct != tt.media {
				t.Errorf("Content-Type %q, want %q", ct, tt.media)
			}
			var got []string
			for _, m := range listedURL.FindAllStringSubmatch(w.Body.String(), -1) {
				got = append(got, strings.TrimSuffix(m[1], ".mirrors.example.org"))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("listed %v, want %v:\n%s", got, tt.want, w.Body)
			}
		})
	}
}
