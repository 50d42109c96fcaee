package group

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/scheduler"
)

func TestHoldings(t *testing.T) {
	old, fresh := content.Copy{Size: 10, ModTime: t0}, content.Copy{Size: 12, ModTime: t0.Add(time.Hour)}
	copies := map[string]content.Copy{"ams1": fresh, "nyc1": old}
	tests := []struct {
		name   string
		h      Holdings
		member string
		want   bool
	}{
		{"nothing known: everyone", Holdings{}, "par1", true},
		{"the best copy", NewHoldings(copies, false), "ams1", true},
		{"an older copy", NewHoldings(copies, false), "nyc1", false},
		{"no copy", NewHoldings(copies, false), "fra1", false},
		{"any copy of a path that changes in place", NewHoldings(copies, true), "nyc1", true},
		{"still no copy", NewHoldings(copies, true), "fra1", false},
		{"an unknown member is not refused", NewHoldings(copies, false).Unknown(map[string]bool{"ams1": true, "nyc1": true}), "par1", true},
		{"an indexed member without it is", NewHoldings(copies, false).Unknown(map[string]bool{"ams1": true, "nyc1": true}), "nyc1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.Holds(tt.member); got != tt.want {
				t.Errorf("Holds(%s) = %t, want %t", tt.member, got, tt.want)
			}
		})
	}
}

func TestAnyCopyPath(t *testing.T) {
	patterns := []string{"dists/*/InRelease", "dists/*/Release", "repodata/", "debian/dists/*/*/binary-*/Packages.xz"}
	tests := []struct {
		path string
		want bool
	}{
		{"/dists/trixie/InRelease", true},
		{"/dists/trixie/main/InRelease", false}, // * is one segment
		{"/dists/trixie/Release", true},
		{"/dists/trixie/Release.gpg", false},
		{"/repodata/repomd.xml", true},
		{"/fedora/repodata/repomd.xml", false}, // anchored at the root
		{"/debian/dists/trixie/main/binary-amd64/Packages.xz", true},
		{"/pool/main/h/hello/hello_2.10-3_amd64.deb", false},
		{"/", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := AnyCopyPath(patterns, tt.path); got != tt.want {
				t.Errorf("AnyCopyPath(%q) = %t, want %t", tt.path, got, tt.want)
			}
		})
	}
}

// TestDecidePartialContent: with the members' copies known, a request
// goes only to a member that holds the best copy, a mirror without it
// sends it to one that has it (rescue) instead of a 404 or stale bytes,
// whatever the load, and a file nobody has is served here (a 404) or
// refused by a dispatcher with 404, never redirected.
func TestDecidePartialContent(t *testing.T) {
	europe := func() scheduler.Client {
		return scheduler.Client{Loc: scheduler.Location{Lat: 50.9, Lon: 6.9, HasCoords: true, Continent: "EU"}}
	}
	old, fresh := content.Copy{Size: 10, ModTime: t0}, content.Copy{Size: 12, ModTime: t0.Add(time.Hour)}
	member := RedirectRules{Group: "www.example.org", Host: "fra1.mirrors.example.org", Enabled: true, Law: LawFairShare,
		LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1, Never: []string{"/"}}
	dispatcher := member
	dispatcher.Dispatcher, dispatcher.Host = true, "dispatch.example.org"
	// fra1 is this mirror; ams1 is nearer to the client than nyc1, and
	// both have room (their serving figures are the view's load).
	snap := snapshot(t, testView(map[string]float64{"fra1": 0.5, "ams1": 0.2, "nyc1": 0.1}), "fra1")
	busy := snapshot(t, testView(map[string]float64{"fra1": 0.5, "ams1": 0.2, "nyc1": 3}), "fra1")
	expired := &GroupSnapshot{}
	*expired = *snap
	expired.Fetched = t0.Add(-time.Hour)
	holding := func(copies map[string]content.Copy, self string, anyCopy bool) func() (Holdings, bool) {
		return func() (Holdings, bool) {
			h := NewHoldings(copies, anyCopy)
			return h, h.Holds(self)
		}
	}
	overloaded := func() Share { return Share{P: 1, Limit: 0.9} }
	within := func() Share { return Share{} }
	tests := []struct {
		name   string
		rules  RedirectRules
		host   string
		hold   func() (Holdings, bool)
		share  func() Share
		snap   *GroupSnapshot
		action Action
		target string
		reason string
		status int
	}{
		{"nothing known: the nearest", member, "www.example.org", nil, overloaded, snap, Redirect, "ams1", ReasonOverload, 0},
		{"the correction skips a member without it", member, "www.example.org",
			holding(map[string]content.Copy{"fra1": fresh, "nyc1": fresh}, "fra1", false), overloaded, snap, Redirect, "nyc1", ReasonOverload, 0},
		{"the correction skips an older copy", member, "www.example.org",
			holding(map[string]content.Copy{"fra1": fresh, "ams1": old, "nyc1": fresh}, "fra1", false), overloaded, snap, Redirect, "nyc1", ReasonOverload, 0},
		{"with room, a mirror that has it serves it", member, "www.example.org",
			holding(map[string]content.Copy{"fra1": fresh, "nyc1": fresh}, "fra1", false), within, snap, Serve, "", ReasonBelowTarget, 0},
		{"a mirror without it rescues", member, "www.example.org",
			holding(map[string]content.Copy{"nyc1": fresh}, "fra1", false), within, snap, Redirect, "nyc1", ReasonRescue, 0},
		{"a rescue goes to a holder however busy", member, "www.example.org",
			holding(map[string]content.Copy{"nyc1": fresh}, "fra1", false), within, busy, Redirect, "nyc1", ReasonRescue, 0},
		{"a mirror with an older copy rescues", member, "www.example.org",
			holding(map[string]content.Copy{"fra1": old, "ams1": fresh}, "fra1", false), within, snap, Redirect, "ams1", ReasonRescue, 0},
		{"an older copy of a path that changes in place is served", member, "www.example.org",
			holding(map[string]content.Copy{"fra1": old, "ams1": fresh}, "fra1", true), within, snap, Serve, "", ReasonBelowTarget, 0},
		{"nobody has it: served here (404)", member, "www.example.org",
			holding(map[string]content.Copy{}, "fra1", false), overloaded, snap, Serve, "", ReasonNoCopy, 0},
		{"only a member out of the view has it: served here", member, "www.example.org",
			holding(map[string]content.Copy{"par1": fresh}, "fra1", false), overloaded, snap, Serve, "", ReasonNoCopy, 0},
		{"an expired view: no rescue", member, "www.example.org",
			holding(map[string]content.Copy{"nyc1": fresh}, "fra1", false), within, expired, Serve, "", ReasonNoCopy, 0},
		{"never on the own host name", member, "fra1.mirrors.example.org",
			holding(map[string]content.Copy{"nyc1": fresh}, "fra1", false), overloaded, snap, Serve, "", ReasonOtherHost, 0},
		{"a dispatcher sends to a holder", dispatcher, "www.example.org",
			holding(map[string]content.Copy{"nyc1": fresh}, "", false), nil, snap, Redirect, "nyc1", ReasonDispatch, 0},
		{"a dispatcher: nobody has it, 404", dispatcher, "www.example.org",
			holding(map[string]content.Copy{}, "", false), nil, snap, Refuse, "", ReasonNoCopy, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := RedirectRequest{Method: http.MethodGet, Host: tt.host, Path: "/pool/f.deb", Client: europe, Holdings: tt.hold}
			share := tt.share
			if share == nil {
				share = func() Share { return Share{P: 1} }
			}
			d := Decide(tt.rules, req, share, tt.snap, t0, rand.New(rand.NewPCG(1, 2)))
			if d.Action != tt.action || d.Member != tt.target || d.Reason != tt.reason || d.Status != tt.status {
				t.Errorf("got %+v, want action %v to %q (%s, status %d)", d, tt.action, tt.target, tt.reason, tt.status)
			}
		})
	}
}

// FuzzDecidePartialContent: whatever the members hold and whatever the
// load, a redirect goes only to a member that holds the best copy, a
// mirror that holds it is never rescued away from, one without it never
// serves it while a sibling in the view holds it, and the own host name
// is never redirected.
func FuzzDecidePartialContent(f *testing.F) {
	f.Add(uint8(0b0111), uint8(0b0010), 0.5, 0.2, 0.1, true, false)
	f.Add(uint8(0b0001), uint8(0), 3.0, 0.95, 0.9, false, true)
	names := []string{"fra1", "ams1", "nyc1", "par1"}
	f.Fuzz(func(t *testing.T, has, older uint8, uFra, uAms, uNyc float64, overloaded, ownHost bool) {
		copies := make(map[string]content.Copy)
		for i, n := range names {
			if has&(1<<i) == 0 {
				continue
			}
			c := content.Copy{Size: 12, ModTime: t0.Add(time.Hour)}
			if older&(1<<i) != 0 {
				c = content.Copy{Size: 10, ModTime: t0}
			}
			copies[n] = c
		}
		h := NewHoldings(copies, false)
		self := h.Holds("fra1")
		snap := snapshot(t, testView(map[string]float64{"fra1": uFra, "ams1": uAms, "nyc1": uNyc}), "fra1")
		rules := RedirectRules{Group: "www.example.org", Host: "fra1.mirrors.example.org", Enabled: true, Law: LawFairShare,
			LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1}
		host := "www.example.org"
		if ownHost {
			host = rules.Host
		}
		share := func() Share { return Share{} }
		if overloaded {
			share = func() Share { return Share{P: 1, Limit: 0.9, Over: true} }
		}
		req := RedirectRequest{Method: http.MethodGet, Host: host, Path: "/pool/f.deb",
			Holdings: func() (Holdings, bool) { return h, self }}
		d := Decide(rules, req, share, snap, t0, rand.New(rand.NewPCG(1, 2)))
		switch {
		case d.Action == Redirect && ownHost:
			t.Fatalf("redirected on the own host name: %+v", d)
		case d.Action == Redirect && !h.Holds(d.Member):
			t.Fatalf("redirected to %s, which lacks the best copy (%+v)", d.Member, copies)
		case d.Reason == ReasonRescue && self:
			t.Fatalf("rescued away from a mirror that holds the best copy")
		case !ownHost && !self && d.Action == Serve && (candidateHolds(snap, h, "ams1") || candidateHolds(snap, h, "nyc1")):
			t.Fatalf("served without the best copy while a candidate holds it: %+v", d)
		}
	})
}

// candidateHolds reports whether member is a candidate of snap (a figure
// that is not a number leaves it out) and holds the best copy.
func candidateHolds(snap *GroupSnapshot, h Holdings, member string) bool {
	_, ok := snap.index[member]
	return ok && h.Holds(member)
}
