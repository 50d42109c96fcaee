package group

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/api"
)

// memberDNSD is the membership part of dnsd's admin API, in memory: a
// GROUP-ADD of a name it has is 409, a change of a member it does not have
// 404, and every request is recorded.
type memberDNSD struct {
	srv     *httptest.Server
	mu      sync.Mutex
	members []api.MemberView
	ops     []string // "add fra1", "drain fra1", …
	at      []time.Time
	down    bool // answer 503 to everything
}

func newMemberDNSD(t *testing.T, members ...api.MemberView) *memberDNSD {
	t.Helper()
	d := &memberDNSD{members: members}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	find := func(name string) int {
		return slices.IndexFunc(d.members, func(m api.MemberView) bool { return m.Name == name })
	}
	handle := func(route api.Route, op string, f func(w http.ResponseWriter, r *http.Request)) {
		mux.HandleFunc(route.Pattern(), func(w http.ResponseWriter, r *http.Request) {
			d.mu.Lock()
			defer d.mu.Unlock()
			if d.down {
				reply(w, http.StatusServiceUnavailable, api.ErrorReply{Error: "down"})
				return
			}
			d.ops = append(d.ops, strings.TrimSpace(op+" "+r.PathValue(api.MemberParam)))
			d.at = append(d.at, time.Now())
			f(w, r)
		})
	}
	handle(api.GetGroup, "view", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.GroupView{Name: testGroup + ".", Policy: "wrr", TTL: api.TTLView{Min: 1, Max: 1}, Members: d.members})
	})
	handle(api.AddMember, "add", func(w http.ResponseWriter, r *http.Request) {
		var info api.MemberInfo
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &info); err != nil {
			reply(w, http.StatusBadRequest, api.ErrorReply{Error: err.Error()})
			return
		}
		if find(info.Name) >= 0 {
			reply(w, http.StatusConflict, api.ErrorReply{Error: "already a member"})
			return
		}
		info.Host += "."
		d.members = append(d.members, api.MemberView{MemberInfo: info, Source: "runtime", State: "unknown"})
		reply(w, http.StatusCreated, info)
	})
	handle(api.RemoveMember, "exit", func(w http.ResponseWriter, r *http.Request) {
		i := find(r.PathValue(api.MemberParam))
		if i < 0 {
			reply(w, http.StatusNotFound, api.ErrorReply{Error: "unknown member"})
			return
		}
		d.members = slices.Delete(d.members, i, i+1)
		reply(w, http.StatusOK, api.Removed{})
	})
	for route, state := range map[api.Route]string{api.DrainMember: "draining", api.UndrainMember: "up"} {
		op := map[string]string{"draining": "drain", "up": "undrain"}[state]
		handle(route, op, func(w http.ResponseWriter, r *http.Request) {
			i := find(r.PathValue(api.MemberParam))
			if i < 0 {
				reply(w, http.StatusNotFound, api.ErrorReply{Error: "unknown member"})
				return
			}
			d.members[i].State = state
			reply(w, http.StatusOK, api.Drained{})
		})
	}
	d.srv = httptest.NewServer(mux)
	t.Cleanup(d.srv.Close)
	return d
}

func (d *memberDNSD) opsSoFar() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.ops)
}

func (d *memberDNSD) setDown(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = down
}

// count returns how many members of name d has.
func (d *memberDNSD) count(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, m := range d.members {
		if m.Name == name {
			n++
		}
	}
	return n
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// joinMember is the member the tests' Joiner adds.
func joinMember() api.MemberInfo {
	return api.MemberInfo{Name: "fra1", Host: "fra1.mirrors.example.org", Addresses: []string{"192.0.2.10", "2001:db8::10"},
		Capacity: 100, Location: api.LocationView{Country: "DE"}}
}

func newTestJoiner(t *testing.T, reg prometheus.Registerer, logs io.Writer, leaveWait time.Duration, urls ...string) *Joiner {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	j, err := NewJoiner(JoinerOptions{URLs: urls, Group: testGroup, Member: joinMember(), Secret: []byte("s"),
		LeaveWait: leaveWait, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		Logger: newTextLogger(logs), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitState polls j until it is in state want, for up to 5 s.
func waitState(t *testing.T, j *Joiner, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for j.State() != want {
		if time.Now().After(deadline) {
			t.Fatalf("state %s, want %s", j.State(), want)
		}
		time.Sleep(time.Millisecond) // polling with a deadline
	}
}

func TestJoinerJoin(t *testing.T) {
	runtime := func(info api.MemberInfo, joined bool, state string) api.MemberView {
		info.Joined = joined
		info.Host += "."
		return api.MemberView{MemberInfo: info, Source: "runtime", State: state}
	}
	other := joinMember()
	other.Capacity = 50
	tests := []struct {
		name    string
		have    []api.MemberView
		want    string   // the state it ends in
		wantOps []string // the requests dnsd got
	}{
		{"a new member", nil, JoinJoined, []string{"add"}},
		{"a restart: kept as it is", []api.MemberView{runtime(joinMember(), true, "up")},
			JoinJoined, []string{"add", "view"}},
		{"a leave cut short: undrained", []api.MemberView{runtime(joinMember(), true, "draining")},
			JoinJoined, []string{"add", "view", "undrain fra1"}},
		{"joined with other settings: replaced", []api.MemberView{runtime(other, true, "up")},
			JoinJoined, []string{"add", "view", "exit fra1", "add"}},
		{"added by an operator with other settings: conflict", []api.MemberView{runtime(other, false, "up")},
			JoinConflict, nil},
		{"in the config file: conflict", []api.MemberView{{MemberInfo: joinMember(), Source: "config", State: "up"}},
			JoinConflict, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newMemberDNSD(t, tt.have...)
			var logs webtest.SyncBuffer
			j := newTestJoiner(t, nil, &logs, 0, d.srv.URL)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- j.Run(ctx) }()
			waitState(t, j, tt.want)
			if tt.want == JoinConflict {
				// Retried with backoff, logged once.
				deadline := time.Now().Add(5 * time.Second)
				for len(d.opsSoFar()) < 6 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if n := strings.Count(logs.String(), "group join failing"); n != 1 {
					t.Errorf("conflict logged %d times, want once:\n%s", n, logs.String())
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if tt.wantOps != nil && !slices.Equal(d.opsSoFar(), tt.wantOps) {
				t.Errorf("requests %q, want %q", d.opsSoFar(), tt.wantOps)
			}
			if n := d.count("fra1"); n != 1 {
				t.Errorf("dnsd has %d members fra1, want 1", n)
			}
		})
	}
}

func TestJoinerRetriesUntilDNSDAnswers(t *testing.T) {
	d := newMemberDNSD(t)
	d.setDown(true)
	var logs webtest.SyncBuffer
	reg := prometheus.NewRegistry()
	j := newTestJoiner(t, reg, &logs, 0, d.srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = j.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(j.requests.WithLabelValues("0", "add", "error")) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no retries")
		}
		time.Sleep(time.Millisecond)
	}
	if got := j.State(); got != JoinJoining {
		t.Errorf("state %s while dnsd is down", got)
	}
	d.setDown(false)
	waitState(t, j, JoinJoined)
	if n := strings.Count(logs.String(), "group join failing"); n != 1 {
		t.Errorf("failures logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "group join recovered") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
	if n := testutil.ToFloat64(j.state.WithLabelValues(JoinJoined)); n != 1 {
		t.Errorf("join_state{state=joined} = %g", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if len(mfs) != 3 {
		t.Errorf("%d metric families, want 3", len(mfs))
	}
}

// TestJoinerRejoins: once joined, a dnsd that loses the member (removed
// behind the mirror's back) is joined again at the next check, and only
// that one; a dnsd whose checks fail, or that has the member drained by
// an operator, is left as it is.
func TestJoinerRejoins(t *testing.T) {
	d1, d2 := newMemberDNSD(t), newMemberDNSD(t)
	var logs webtest.SyncBuffer
	j, err := NewJoiner(JoinerOptions{URLs: []string{d1.srv.URL, d2.srv.URL}, Group: testGroup, Member: joinMember(),
		Secret: []byte("s"), Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		CheckInterval: 10 * time.Millisecond, Logger: newTextLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- j.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitState(t, j, JoinJoined)
	// checks waits until d has answered n more checks than it had.
	checks := func(d *memberDNSD, n int) {
		t.Helper()
		count := func() int {
			c := 0
			for _, op := range d.opsSoFar() {
				if op == "view" {
					c++
				}
			}
			return c
		}
		want := count() + n
		deadline := time.Now().Add(5 * time.Second)
		for count() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d checks after 5s, want %d", count(), want)
			}
			time.Sleep(time.Millisecond) // polling with a deadline
		}
	}
	adds := func(d *memberDNSD) int {
		return len(slices.DeleteFunc(d.opsSoFar(), func(op string) bool { return op != "add" }))
	}

	t.Run("a dnsd that lost the member gets it again", func(t *testing.T) {
		d1.mu.Lock()
		d1.members = nil
		d1.mu.Unlock()
		deadline := time.Now().Add(5 * time.Second)
		for d1.count("fra1") != 1 {
			if time.Now().After(deadline) {
				t.Fatal("not joined again after 5s")
			}
			time.Sleep(time.Millisecond) // polling with a deadline
		}
		waitState(t, j, JoinJoined)
		if st := j.Status(); st != (JoinStatus{State: JoinJoined, Joined: 2, DNSD: 2}) {
			t.Errorf("status %+v, want joined on 2 of 2", st)
		}
		if n := adds(d1); n != 2 {
			t.Errorf("%d GROUP-ADDs on the dnsd that lost it, want 2", n)
		}
		if n := adds(d2); n != 1 {
			t.Errorf("%d GROUP-ADDs on the other dnsd, want 1", n)
		}
		if n := strings.Count(logs.String(), "joining again"); n != 1 {
			t.Errorf("%d logs of joining again, want 1:\n%s", n, logs.String())
		}
	})

	t.Run("a failing check changes nothing", func(t *testing.T) {
		d2.setDown(true)
		checks(d1, 3) // d2's checks fail meanwhile
		d2.setDown(false)
		checks(d2, 2)
		if n := adds(d2); n != 1 || j.State() != JoinJoined {
			t.Errorf("%d GROUP-ADDs on the dnsd whose checks failed, state %s; want 1, joined", n, j.State())
		}
	})

	t.Run("a drain by an operator stays", func(t *testing.T) {
		d1.mu.Lock()
		d1.members[0].State = "draining"
		d1.mu.Unlock()
		checks(d1, 3)
		d1.mu.Lock()
		state := d1.members[0].State
		d1.mu.Unlock()
		if state != "draining" || slices.Contains(d1.opsSoFar(), "undrain fra1") {
			t.Errorf("member %s after checks, ops %v: want it left draining", state, d1.opsSoFar())
		}
	})
}

func TestJoinerLeave(t *testing.T) {
	const wait = 100 * time.Millisecond
	d := [2]*memberDNSD{newMemberDNSD(t), newMemberDNSD(t)}
	j := newTestJoiner(t, nil, nil, wait, d[0].srv.URL, d[1].srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = j.Run(ctx) }()
	waitState(t, j, JoinJoined)
	cancel()
	if err := j.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, d := range d {
		if ops := d.opsSoFar(); !slices.Equal(ops, []string{"add", "drain fra1", "exit fra1"}) {
			t.Fatalf("dnsd %d: requests %q", i, ops)
		}
		if gap := d.at[2].Sub(d.at[1]); gap < wait {
			t.Errorf("dnsd %d: GROUP-EXIT %s after the drain, want at least %s", i, gap, wait)
		}
		if n := d.count("fra1"); n != 0 {
			t.Errorf("dnsd %d still has the member", i)
		}
	}
	if got := j.State(); got != JoinLeft {
		t.Errorf("state %s after Leave", got)
	}

	t.Run("a second signal cuts the wait short", func(t *testing.T) {
		d := newMemberDNSD(t)
		j := newTestJoiner(t, nil, nil, time.Hour, d.srv.URL)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _ = j.Run(ctx) }()
		waitState(t, j, JoinJoined)
		cancel()
		lctx, lcancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- j.Leave(lctx) }()
		waitState(t, j, JoinWaiting)
		lcancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := d.count("fra1"); n != 0 {
			t.Error("GROUP-EXIT not sent")
		}
	})
	t.Run("the wait is the group's ttl.max", func(t *testing.T) {
		d := newMemberDNSD(t)
		j := newTestJoiner(t, nil, nil, 0, d.srv.URL)
		got, from := j.leaveWait(context.Background())
		if got != time.Second || from != "ttl.max" {
			t.Errorf("wait %s from %s, want 1s from ttl.max", got, from)
		}
	})
	t.Run("no dnsd: no wait", func(t *testing.T) {
		d := newMemberDNSD(t)
		d.setDown(true)
		j := newTestJoiner(t, nil, nil, time.Hour, d.srv.URL)
		if err := j.Leave(context.Background()); err == nil || !errors.Is(err, api.ErrStatus) {
			t.Errorf("Leave: %v, want the failures", err)
		}
	})
}

func TestSameMember(t *testing.T) {
	lat := 50.1
	base := joinMember()
	tests := []struct {
		name   string
		change func(m *api.MemberInfo)
		same   bool
	}{
		{"identical", func(*api.MemberInfo) {}, true},
		{"dnsd's canonical host and address order", func(m *api.MemberInfo) {
			m.Host = "FRA1.mirrors.example.org."
			m.Addresses = []string{"2001:db8::10", "192.0.2.10"}
			m.Weight = 1
		}, true},
		{"another address", func(m *api.MemberInfo) { m.Addresses = []string{"192.0.2.11"} }, false},
		{"another capacity", func(m *api.MemberInfo) { m.Capacity = 1 }, false},
		{"a location", func(m *api.MemberInfo) { m.Location.Lat, m.Location.Lon = &lat, &lat }, false},
		{"a probe", func(m *api.MemberInfo) { m.Probe = "http://192.0.2.10:9180/v1/load" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			have := joinMember()
			tt.change(&have)
			if got := SameMember(have, base); got != tt.same {
				t.Errorf("SameMember = %v, want %v", got, tt.same)
			}
		})
	}
}

// TestJoinerJitter: every wait between two attempts is drawn within ±20 %
// of the backoff, so mirrors that failed together spread out.
func TestJoinerJitter(t *testing.T) {
	j, err := NewJoiner(JoinerOptions{URLs: []string{"http://127.0.0.1:1"}, Group: testGroup, Member: joinMember(),
		Secret: []byte("s"), Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	const d = time.Second
	lo, hi := d, time.Duration(0)
	for range 1000 {
		w := j.jittered(d)
		if w < 800*time.Millisecond || w >= 1200*time.Millisecond {
			t.Fatalf("wait %v outside [0.8 s, 1.2 s)", w)
		}
		lo, hi = min(lo, w), max(hi, w)
	}
	if lo > 850*time.Millisecond || hi < 1150*time.Millisecond {
		t.Errorf("1000 waits within [%v, %v]: want them spread over [0.8 s, 1.2 s)", lo, hi)
	}
}
