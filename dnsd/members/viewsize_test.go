package members_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd/admin"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// fixedView is a Controller whose GROUP-QUERY answers with one view.
type fixedView struct {
	*members.Controller
	v api.GroupView
}

func (f fixedView) View(string) (api.GroupView, error) { return f.v, nil }

// label returns a DNS label of n bytes ending in s.
func label(n int, s string) string { return strings.Repeat("a", n-len(s)) + s }

// TestWorstCaseGroupView builds the largest group view that the caps of
// zones allow: a group name of 253 bytes, MaxGroupMembers members (one in
// the file, the rest added through GROUP-ADD, so that dnsd's own rules
// accept every one), each with MaxMemberAddresses full IPv6 addresses, a
// name, host name and probe URL of the longest, every field filled and
// every figure and time at its longest JSON; it encodes it as GET
// /v1/groups/{group} does (the real admin handler) and holds it to half
// of the mirrors' view limit, api.MaxViewBytes, and to the bounds the
// compile-time check uses.
func TestWorstCaseGroupView(t *testing.T) {
	dir := t.TempDir()
	// 63+1+63+1+63+1+49+1+11 = 253 bytes before the root's dot.
	group := label(63, "g") + "." + label(63, "g") + "." + label(63, "g") + "." + label(49, "g") + ".example.org."
	if n := len(group); n != 254 {
		t.Fatalf("group name of %d bytes", n)
	}
	host := func(i int) string { // 253 bytes and the dot
		return label(63, "h") + "." + label(63, "h") + "." + label(63, "h") + "." + label(49, fmt.Sprintf("m%03d", i)) + ".example.org."
	}
	longest := -1.2345678901234567e-123 // 24 bytes of JSON, and a valid lat, lon, load, ...
	probeURL := "http://p.example.org/" + strings.Repeat("x", zones.MaxProbeLen-len("http://p.example.org/"))
	info := func(i int) api.MemberInfo {
		m := api.MemberInfo{
			Name: label(zones.MaxMemberNameLen, fmt.Sprintf("%03d", i)), Host: host(i),
			Location: api.LocationView{Lat: &longest, Lon: &longest, Country: "DE", Continent: "EU"},
			Capacity: zones.MaxRuntimeCapacity, Bandwidth: 1.2345678901234567e+8, Weight: 1.2345678901234567e-12,
			Probe: probeURL, Joined: true,
		}
		for a := range zones.MaxMemberAddresses {
			m.Addresses = append(m.Addresses, fmt.Sprintf("2a00:ffff:ffff:ffff:ffff:ffff:%04x:%04x", 0x1000+i, 0x1000+a))
		}
		return m
	}
	static := info(0)
	cfg := fmt.Sprintf(`zones:
  - origin: example.org.
    file: example.org.zone
groups:
  - name: %s
    secret: %s
    allow_private: true
    max_runtime_members: %d
    members:
      - {name: %s, host: %s, addresses: [%s], capacity: 1000, probe: %q, location: {lat: %g, lon: %g, country: DE, continent: EU}}
`, group, testenv.Secret, zones.MaxGroupMembers-1, static.Name, static.Host, strings.Join(static.Addresses, ", "), static.Probe, longest, longest)
	for name, data := range map[string]string{"example.org.zone": testenv.Zone, "dnsd.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	disp, err := dispatch.New(dispatch.Options{Registry: reg, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := members.New(members.Options{Registry: reg, Answers: disp, Server: testenv.Server(t, reg, disp)})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.Load(set); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < zones.MaxGroupMembers; i++ {
		if _, err := ctl.Add(group, info(i)); err != nil {
			t.Fatalf("GROUP-ADD %d: %v", i, err)
		}
	}
	if _, err := ctl.Add(group, info(zones.MaxGroupMembers)); err == nil {
		t.Fatalf("GROUP-ADD of member %d: accepted", zones.MaxGroupMembers+1)
	}
	worstRuntimeState(t, info)
	v, err := ctl.View(group)
	if err != nil {
		t.Fatal(err)
	}
	// Every figure and time at its longest JSON.
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(23*3600+59*60)))
	v.Policy, v.Answers, v.FailOpen, v.Time = "least-load", math.MaxInt64, true, last
	v.TTL = api.TTLView{Min: math.MaxUint32, Max: math.MaxUint32}
	v.Watermarks = api.Watermarks{Low: longest, High: longest}
	v.MaxLag, v.LagFailOpen = longest, true
	for i := range v.Members {
		m := &v.Members[i]
		m.State, m.Since, m.Reported = "draining", last, last
		m.Load, m.BytesPerSecond, m.Pending = longest, longest, longest
		m.Utilization, m.LoadUtilization, m.BandwidthUtilization = longest, longest, longest
		m.ReportAge, m.AnswerShare, m.CapacityShare = longest, longest, longest
		m.Capacity, m.Bandwidth, m.Weight, m.Joined = longest, longest, longest, true
		m.Generation, m.Lag, m.Rescued = last, longest, math.MaxUint64
		m.LastReport = &probe.Report{Group: group, Member: m.Name, Seq: math.MaxUint64, Time: last,
			R: longest, M: longest, Conns: math.MinInt64, BytesPerSecond: longest, RedirectsPerSecond: longest,
			Load: longest, Capacity: longest, Bandwidth: longest, GroupRequestsPerSecond: longest,
			Window: longest, ServingLoad: longest, Generation: last, Rescued: math.MaxUint64,
			Schemes: []string{probe.SchemeHTTPS, probe.SchemeHTTP}, CertNotAfter: last}
	}
	for i := range probe.MaxTopPaths { // the longest paths of the longest JSON
		v.Top = append(v.Top, probe.PathCount{Path: fmt.Sprintf("/%0*d", probe.MaxTopPathLen-1, i), Count: longest})
	}
	if len(v.Members) != zones.MaxGroupMembers {
		t.Fatalf("%d members, want %d", len(v.Members), zones.MaxGroupMembers)
	}
	filled(t, "view", reflect.ValueOf(v))

	srv := httptest.NewServer(admin.NewHandler(admin.Options{Logger: testenv.DiscardLogger(), Gatherer: reg,
		Membership: fixedView{ctl, v}, Verifier: api.NewVerifier(30*time.Second, 0)}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + api.GetGroup.Path(group))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d %v", resp.StatusCode, err)
	}
	one := len(body) / len(v.Members) // the head is small beside a member
	t.Logf("worst-case view: %d members, %d bytes (about %d a member); the mirrors read %d, half of it is %d; bound at compile time: %d",
		len(v.Members), len(body), one, api.MaxViewBytes, api.MaxViewBytes/2, members.MaxViewBytes)
	if len(body) > api.MaxViewBytes/2 {
		t.Errorf("worst-case view of %d bytes, over half the mirrors' limit (%d)", len(body), api.MaxViewBytes/2)
	}
	if len(body) > members.MaxViewBytes || one > members.MaxMemberViewBytes {
		t.Errorf("worst-case view of %d bytes (%d a member) is over the compile-time bound %d (%d a member): raise the bound's figures",
			len(body), one, members.MaxViewBytes, members.MaxMemberViewBytes)
	}
}

// etcdMaxRequestBytes is etcd's default --max-request-bytes (1.5 MiB).
const etcdMaxRequestBytes = 3 << 19

// worstRuntimeState holds a group's largest run-time state, every member
// but the file's one added at run time (info) and drained, which
// dnsd/cluster writes as one etcd value, to etcd's default request limit
// less 64 KiB for the rest of the request (the key, the comparison).
func worstRuntimeState(t *testing.T, info func(int) api.MemberInfo) {
	t.Helper()
	var gs members.GroupState
	for i := 1; i < zones.MaxGroupMembers; i++ {
		gs.Members = append(gs.Members, info(i))
		gs.Drained = append(gs.Drained, info(i).Name)
	}
	data, err := json.Marshal(gs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worst-case run-time state of a group: %d bytes; etcd's default request limit is %d", len(data), etcdMaxRequestBytes)
	if len(data) > etcdMaxRequestBytes-64<<10 {
		t.Errorf("worst-case run-time state of %d bytes: with the rest of the request, over etcd's default request limit (%d)", len(data), etcdMaxRequestBytes)
	}
}

// filled fails the test for every field of v (a struct, recursively) left
// at its zero value, so that a field added to the view is not left out of
// the worst case.
func filled(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if strings.HasSuffix(path, ".LastReport.Top") {
		return // the view leaves a member's top out: the group's Top merges them
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			t.Errorf("%s is nil", path)
			return
		}
		filled(t, path, v.Elem())
	case reflect.Struct:
		if _, ok := v.Interface().(time.Time); ok {
			if v.IsZero() {
				t.Errorf("%s is zero", path)
			}
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				filled(t, path+"."+f.Name, v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("%s is empty", path)
		}
		for i := range v.Len() {
			filled(t, fmt.Sprintf("%s[%d]", path, i), v.Index(i))
		}
	default:
		if v.IsZero() {
			t.Errorf("%s is zero", path)
		}
	}
}
