package members_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// TestAdminAPIClient drives the admin API with the client that groupctl
// and the mirrors use: each call's typed answer, and errors that carry the
// status and dnsd's reason.
func TestAdminAPIClient(t *testing.T) {
	e := startCtl(t, t.TempDir(), testenv.Config(""))
	ctx := context.Background()
	newClient := func(secret string) *api.Client {
		c, err := api.NewClient(e.admin.URL, api.ClientOptions{Secret: []byte(secret)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newClient(testenv.Secret)
	const group = "www.example.org."

	t.Run("the view carries the pushed figures as reported", func(t *testing.T) {
		at := time.Now().Add(-time.Second).Truncate(time.Millisecond)
		rep := probe.Report{Group: group, Member: "fra1", Seq: 1, Time: at, R: 12.34, M: 0.5, Load: probe.LoadOf(12.34, 0.5), Capacity: 1000}
		if err := c.PushLoad(ctx, rep); err != nil {
			t.Fatal(err)
		}
		var m api.MemberView
		probetest.Until(t, 5*time.Second, func() string {
			v, err := c.Group(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			m = v.Members[0]
			if !m.Reported.Equal(at) {
				return fmt.Sprintf("the report in the view: reported %v, want %v", m.Reported, at)
			}
			return ""
		})
		for range 50 {
			e.answered() // each answer adds pending load until the next report
		}
		v, err := c.Group(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		m = v.Members[0]
		if m.Load != rep.Load {
			t.Errorf("load %v, want %v as reported", m.Load, rep.Load)
		}
		if want := (m.Load + m.Pending) / m.Capacity; m.Pending <= 0 || m.Utilization != want || m.LoadUtilization != want || m.BandwidthUtilization != 0 {
			t.Errorf("pending %v, utilization %v: not (load + pending) / capacity of %v, %v", m.Pending, m.Utilization, m.Load, m.Capacity)
		}
		if m.LastReport == nil || m.LastReport.Seq != 1 {
			t.Errorf("last report %+v", m.LastReport)
		}
	})

	t.Run("a member limited by its uplink is as utilized as its bandwidth says", func(t *testing.T) {
		added, err := c.AddMember(ctx, group, api.MemberInfo{Name: "bw1", Host: "bw1.example.org.", Addresses: []string{"10.0.1.9"},
			Capacity: 1000, Bandwidth: 125e6})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = c.RemoveMember(ctx, group, "bw1") }()
		if added.Bandwidth != 125e6 {
			t.Errorf("GROUP-ADD answered bandwidth %v, want 125e6", added.Bandwidth)
		}
		at := time.Now().Add(-time.Second).Truncate(time.Millisecond)
		rep := probe.Report{Group: group, Member: "bw1", Seq: 1, Time: at, R: 2, Load: probe.LoadOf(2, 0),
			BytesPerSecond: 100e6, Capacity: 1000, Bandwidth: 125e6}
		if err := c.PushLoad(ctx, rep); err != nil {
			t.Fatal(err)
		}
		var m api.MemberView
		probetest.Until(t, 5*time.Second, func() string {
			v, err := c.Group(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			for _, m = range v.Members {
				if m.Name == "bw1" {
					if !m.Reported.Equal(at) {
						return fmt.Sprintf("the report in the view: bw1 reported %v, want %v", m.Reported, at)
					}
					return ""
				}
			}
			return "the report in the view: no member bw1"
		})

		if m.BytesPerSecond != 100e6 || m.Bandwidth != 125e6 || m.BandwidthUtilization != 0.8 ||
			m.LoadUtilization >= 0.1 || m.Utilization != 0.8 {
			t.Errorf("bw1: bytes/s %v of %v, utilization %v (load %v, bandwidth %v); want 0.8 by bandwidth",
				m.BytesPerSecond, m.Bandwidth, m.Utilization, m.LoadUtilization, m.BandwidthUtilization)
		}
	})

	t.Run("a dispatcher's redirects are pending load on the member", func(t *testing.T) {
		before := func() float64 {
			v, err := c.Group(ctx, group)
			if err != nil {
				t.Fatal(err)
			}
			return v.Members[0].Pending
		}
		p0 := before()
		if err := c.PushRedirects(ctx, group, api.RedirectReport{Dispatcher: "d1.example.org", Time: time.Now(),
			Members: map[string]float64{"fra1": 20}}); err != nil {
			t.Fatal(err)
		}
		if p := before(); p < p0+199 || p > p0+201 {
			t.Errorf("pending %v after 20 redirects/s from a dispatcher, want %v + 200", p, p0)
		}
	})

	calls := []struct {
		name string
		call func() (any, error)
		want any
	}{
		{"list", func() (any, error) {
			l, err := c.Groups(ctx)
			return len(l.Groups), err
		}, 1},
		{"add", func() (any, error) {
			m, err := c.AddMember(ctx, group, api.MemberInfo{Name: "ams1", Host: "ams1.example.org.", Addresses: []string{"10.0.1.2"}, Capacity: 500})
			return m.Name + " " + m.Addresses[0], err
		}, "ams1 10.0.1.2"},
		{"drain", func() (any, error) { return c.Drain(ctx, group, "ams1") }, api.Drained{Drained: true, Member: "ams1"}},
		{"undrain", func() (any, error) { return c.Undrain(ctx, group, "ams1") }, api.Drained{Drained: false, Member: "ams1"}},
		{"remove", func() (any, error) { return c.RemoveMember(ctx, group, "ams1") }, api.Removed{Removed: "ams1"}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}

	refused := []struct {
		name string
		call func() error
		code int
		msg  string
	}{
		{"wrong secret", func() error { _, err := newClient("wrong").Drain(ctx, group, "fra1"); return err },
			http.StatusUnauthorized, "api: signature mismatch"},
		{"unknown group", func() error { _, err := c.Group(ctx, "nope.example.org"); return err },
			http.StatusNotFound, "dnsd: unknown group: nope.example.org."},
		{"static member", func() error { _, err := c.RemoveMember(ctx, group, "fra1"); return err },
			http.StatusConflict, "fra1"},
		{"redirects to an unknown member", func() error {
			return c.PushRedirects(ctx, group, api.RedirectReport{Dispatcher: "d1", Time: time.Now(), Members: map[string]float64{"ghost": 1}})
		}, http.StatusNotFound, "unknown member"},
		{"redirects at an absurd rate", func() error {
			return c.PushRedirects(ctx, group, api.RedirectReport{Dispatcher: "d1", Time: time.Now(), Members: map[string]float64{"fra1": 1e12}})
		}, http.StatusBadRequest, "members.fra1"},
		{"redirects from the future", func() error {
			return c.PushRedirects(ctx, group, api.RedirectReport{Dispatcher: "d1", Time: time.Now().Add(time.Hour), Members: map[string]float64{"fra1": 1}})
		}, http.StatusBadRequest, "redirect report: probe: report from the future: time: 1h0m0s ahead"},
		{"redirects from long ago", func() error {
			return c.PushRedirects(ctx, group, api.RedirectReport{Dispatcher: "d1", Time: time.Now().Add(-time.Hour), Members: map[string]float64{"fra1": 1}})
		}, http.StatusBadRequest, "time: 1h0m0s behind"},
		{"redirects older than the dispatcher's last", func() error {
			return c.PushRedirects(ctx, group, api.RedirectReport{Dispatcher: "d1.example.org", Time: time.Now().Add(-10 * time.Second), Members: map[string]float64{"fra1": 1}})
		}, http.StatusConflict, "not after dispatcher d1.example.org's newest report"},
		{"redirects unsigned", func() error {
			return newClient("wrong").PushRedirects(ctx, group, api.RedirectReport{Dispatcher: "d1", Time: time.Now()})
		}, http.StatusUnauthorized, "signature"},
		{"push for another member", func() error {
			return c.PushLoad(ctx, probe.Report{Group: group, Member: "ghost", Time: time.Now()})
		}, http.StatusNotFound, "unknown member"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var se *api.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *api.StatusError", err)
			}
			if se.Code != tc.code || !strings.Contains(se.Message, tc.msg) {
				t.Errorf("%d %q, want %d with %q", se.Code, se.Message, tc.code, tc.msg)
			}
		})
	}
}
