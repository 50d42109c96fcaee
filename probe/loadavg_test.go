package probe

import (
	"runtime"
	"strings"
	"testing"
)

func TestParseLoadavg(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Loadavg
		err  string
	}{
		{"typical", "0.52 0.58 0.59 2/1234 56789\n", Loadavg{0.52, 0.58, 0.59, 2, 1234, 56789}, ""},
		{"idle", "0.00 0.00 0.00 1/98 7", Loadavg{0, 0, 0, 1, 98, 7}, ""},
		{"busy", "31.07 16.20 8.44 33/2048 4194303\n", Loadavg{31.07, 16.20, 8.44, 33, 2048, 4194303}, ""},
		{"empty", "", Loadavg{}, "want 5 fields"},
		{"four fields", "0.1 0.2 0.3 1/2", Loadavg{}, "want 5 fields"},
		{"bad load", "x 0.2 0.3 1/2 3", Loadavg{}, "field 1"},
		{"negative load", "0.1 -0.2 0.3 1/2 3", Loadavg{}, "field 2"},
		{"nan load", "0.1 0.2 NaN 1/2 3", Loadavg{}, "field 3"},
		{"no slash", "0.1 0.2 0.3 12 3", Loadavg{}, "running/total"},
		{"bad running", "0.1 0.2 0.3 a/2 3", Loadavg{}, "running count"},
		{"total below running", "0.1 0.2 0.3 5/2 3", Loadavg{}, "total"},
		{"bad pid", "0.1 0.2 0.3 1/2 -3", Loadavg{}, "last pid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLoadavg(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadRunQueueReal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/loadavg is Linux only")
	}
	m, err := ReadRunQueue()
	if err != nil {
		t.Fatal(err)
	}
	if m < 0 {
		t.Errorf("run queue %g < 0", m)
	}
}
