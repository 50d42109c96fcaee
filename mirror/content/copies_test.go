package content

import (
	"testing"
	"time"
)

func TestCopySame(t *testing.T) {
	at := time.Unix(1700000000, 0)
	tests := []struct {
		name string
		a, b Copy
		want bool
	}{
		{"same size and time", Copy{Size: 10, ModTime: at}, Copy{Size: 10, ModTime: at}, true},
		{"the same second", Copy{Size: 10, ModTime: at}, Copy{Size: 10, ModTime: at.Add(400 * time.Millisecond)}, true},
		{"another second", Copy{Size: 10, ModTime: at}, Copy{Size: 10, ModTime: at.Add(time.Second)}, false},
		{"another size", Copy{Size: 10, ModTime: at}, Copy{Size: 11, ModTime: at}, false},
		{"hashes decide", Copy{Size: 10, ModTime: at, Hash: "x"}, Copy{Size: 10, ModTime: at, Hash: "y"}, false},
		{"hashes decide over time", Copy{Size: 10, ModTime: at, Hash: "x"}, Copy{Size: 10, ModTime: at.Add(time.Hour), Hash: "x"}, true},
		{"one hash: size and time", Copy{Size: 10, ModTime: at, Hash: "x"}, Copy{Size: 10, ModTime: at}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Same(tt.b); got != tt.want {
				t.Errorf("%+v.Same(%+v) = %t, want %t", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestBestCopy(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	old, fresh := Copy{Size: 10, ModTime: t0}, Copy{Size: 12, ModTime: t0.Add(time.Hour)}
	tests := []struct {
		name   string
		copies map[string]Copy
		want   Copy
		ok     bool
	}{
		{"nobody", nil, Copy{}, false},
		{"the newest", map[string]Copy{"a": old, "b": fresh, "c": old}, fresh, true},
		{"a tie of seconds: the larger", map[string]Copy{"a": {Size: 5, ModTime: t0}, "b": {Size: 9, ModTime: t0.Add(time.Millisecond)}}, Copy{Size: 9, ModTime: t0.Add(time.Millisecond)}, true},
		{"a tie of both: the greater hash", map[string]Copy{"a": {Size: 5, ModTime: t0, Hash: "aa"}, "b": {Size: 5, ModTime: t0, Hash: "bb"}}, Copy{Size: 5, ModTime: t0, Hash: "bb"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 { // the map's order varies: the answer must not
				got, ok := BestCopy(tt.copies)
				if ok != tt.ok || got != tt.want {
					t.Fatalf("BestCopy = %+v, %t; want %+v, %t", got, ok, tt.want, tt.ok)
				}
			}
		})
	}
}
