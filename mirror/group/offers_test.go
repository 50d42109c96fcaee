package group

import (
	"math/rand/v2"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
)

// offersView is a group of four idle members: fra1 (this mirror), ams1
// serving http on IPv4, nyc1 https and http on both families, and syd1
// https alone on IPv6 alone; least-load puts ams1 first (most room).
func offersView() api.GroupView {
	m := func(name string, capacity float64, schemes []string, addrs ...string) api.MemberView {
		return api.MemberView{
			MemberInfo: api.MemberInfo{Name: name, Host: name + ".mirrors.example.org", Capacity: capacity, Addresses: addrs},
			State:      "up", Reported: t0.Add(-time.Second),
			LastReport: &probe.Report{Group: "www.example.org.", Member: name, Time: t0, Capacity: capacity, Schemes: schemes},
		}
	}
	return api.GroupView{
		Name: "www.example.org.", Policy: "least-load", Watermarks: api.Watermarks{Low: 0.7, High: 0.9},
		Members: []api.MemberView{
			m("fra1", 100, nil, "192.0.2.1"),
			m("ams1", 400, nil, "192.0.2.2"),
			m("nyc1", 300, []string{"http", "https"}, "192.0.2.3", "2001:db8::3"),
			m("syd1", 200, []string{"https"}, "2001:db8::4"),
		},
	}
}

// TestDecideKeepsSchemeAndFamily: a redirect never downgrades https to
// http and never sends a client to a sibling without an address of its
// family; when no sibling qualifies a member serves and a dispatcher
// refuses, rather than break the request.
func TestDecideKeepsSchemeAndFamily(t *testing.T) {
	member := RedirectRules{Group: "www.example.org", Host: "fra1.mirrors.example.org", Enabled: true, Law: LawWatermark,
		LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1}
	dispatcher := RedirectRules{Group: "www.example.org", Host: "d.example.org", Dispatcher: true}
	v4, v6 := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8:9::7")
	tests := []struct {
		name   string
		rules  RedirectRules
		scheme string
		client netip.Addr
		want   []string // the acceptable targets
		reason string
	}{
		{"http over IPv4: an http sibling on IPv4", member, SchemeHTTP, v4, []string{"ams1", "nyc1"}, ReasonOverload},
		{"https over IPv4: nyc1 alone", member, SchemeHTTPS, v4, []string{"nyc1"}, ReasonOverload},
		{"http over IPv6: nyc1 alone", member, SchemeHTTP, v6, []string{"nyc1"}, ReasonOverload},
		{"https over IPv6: not ams1", member, SchemeHTTPS, v6, []string{"nyc1", "syd1"}, ReasonOverload},
		{"unknown family: the scheme alone", member, SchemeHTTPS, netip.Addr{}, []string{"nyc1", "syd1"}, ReasonOverload},
		{"dispatcher, https over IPv4", dispatcher, SchemeHTTPS, v4, []string{"nyc1"}, ReasonDispatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			self := "fra1"
			if tt.rules.Dispatcher {
				self = ""
			}
			req := RedirectRequest{Method: http.MethodGet, Host: "www.example.org", Path: "/f", Need: api.NeedOf(tt.scheme, tt.client)}
			for seed := range uint64(20) { // whichever the policy draws
				snap := snapshot(t, offersView(), self)
				d := Decide(tt.rules, req, func() Share { return Share{P: 1} }, snap, t0, rand.New(rand.NewPCG(seed, 2)))
				if !slices.Contains(tt.want, d.Member) || d.Reason != tt.reason {
					t.Fatalf("seed %d: Decide = %+v, want one of %v (%s)", seed, d, tt.want, tt.reason)
				}
			}
		})
	}
	t.Run("nobody qualifies: served, or refused by a dispatcher", func(t *testing.T) {
		v := offersView()
		v.Members = v.Members[:2] // fra1 and ams1: http on IPv4 only
		req := RedirectRequest{Method: http.MethodGet, Host: "www.example.org", Path: "/f", Need: api.NeedOf(SchemeHTTPS, v4)}
		if d := Decide(member, req, func() Share { return Share{P: 1} }, snapshot(t, v, "fra1"), t0, rand.New(rand.NewPCG(1, 2))); d.Action != Serve || d.Reason != ReasonNoSibling {
			t.Errorf("member: %+v, want served (no sibling)", d)
		}
		if d := Decide(dispatcher, req, nil, snapshot(t, v, ""), t0, rand.New(rand.NewPCG(1, 2))); d.Action != Refuse || d.Status != http.StatusServiceUnavailable {
			t.Errorf("dispatcher: %+v, want 503", d)
		}
	})
}
