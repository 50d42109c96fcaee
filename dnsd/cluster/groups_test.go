package cluster

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe/api"
)

// TestGroupValueFormats: a groups/ value is written with its format, and
// read back; one of before values carried a format (the older format, an
// NS set's older nodes' or an etcd of an earlier release) is read as
// format 1; one of a newer format is left out, and the node says so; an
// older dnsd reads the value written now.
func TestGroupValueFormats(t *testing.T) {
	gs := members.GroupState{Members: []api.MemberInfo{{Name: "m1", Host: "m1.example.org.", Addresses: []string{"192.0.2.1"}, Capacity: 10}},
		Drained: []string{"m1"}}
	written, err := json.Marshal(groupValue{Format: groupsFormat, GroupState: gs})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		value string
		want  bool // read into the state
	}{
		{"written now", string(written), true},
		{"before formats", `{"members":[{"name":"m1","host":"m1.example.org.","addresses":["192.0.2.1"],"capacity":10}],"drained":["m1"]}`, true},
		{"format 1", `{"format":1,"members":[{"name":"m1","host":"m1.example.org.","addresses":["192.0.2.1"],"capacity":10}],"drained":["m1"]}`, true},
		{"a newer format", `{"format":2,"members":[{"name":"m1","host":"m1.example.org.","addresses":["192.0.2.1"],"capacity":10}],"drained":["m1"]}`, false},
		{"not JSON", `{"members":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			g := &groupKeys{log: slog.New(slog.NewTextHandler(&logs, nil)), sess: &session{sessionConfig: sessionConfig{prefix: "/tm/"}}}
			st := members.NewState()
			g.decode(st, &mvccpb.KeyValue{Key: []byte("/tm/groups/www.example.org."), Value: []byte(tt.value), ModRevision: 7})
			got, ok := st.Groups["www.example.org."]
			if ok != tt.want || ok && !reflect.DeepEqual(got, gs) {
				t.Errorf("read %v %+v, want read %v %+v; log:\n%s", ok, got, tt.want, gs, logs.String())
			}
			if !tt.want && !strings.Contains(logs.String(), "left out") {
				t.Errorf("a value left out without a word:\n%s", logs.String())
			}
		})
	}
	if !strings.Contains(string(written), `"format":1`) {
		t.Errorf("the value written carries no format: %s", written)
	}
	var older members.GroupState // what a dnsd of before formats decodes
	if err := json.Unmarshal(written, &older); err != nil || !reflect.DeepEqual(older, gs) {
		t.Errorf("an older dnsd reads the value written now as %+v (%v), want %+v", older, err, gs)
	}
}
