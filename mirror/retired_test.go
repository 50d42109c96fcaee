package mirror

import (
	"testing"
)

// TestRetiredKeys: every key mirror.yaml no longer has is an error at the
// place it was written that says what to write instead.
func TestRetiredKeys(t *testing.T) {
	const head = "listen: [':8080']\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\nroot: .\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"dnsd.secret_file", "dnsd:\n  url: http://a\n  secret_file: s\n", "m.yaml:8:3: dnsd.secret_file: retired key: write secret: {file: PATH}"},
		{"redirect.low_watermark", "redirect: {low_watermark: 0.7}\n", "m.yaml:6:12: redirect.low_watermark: retired key: remove it: the mirror takes the group's policy.low_watermark from dnsd's group view"},
		{"redirect.high_watermark", "redirect:\n  high_watermark: 0.9\n", "m.yaml:7:3: redirect.high_watermark: retired key: remove it: the mirror takes the group's policy.high_watermark from dnsd's group view"},
		{"site.cache.miss_delay_per_mib", "site:\n  cache:\n    miss_delay_per_mib: 1ms\n", "m.yaml:8:5: site.cache.miss_delay_per_mib: retired key: remove it: a benchmark knob, now the mirror's -bench-miss-delay-per-mib flag"},
		{"site.policy.max_object_bytes", "site:\n  policy: {name: tb-ccrd, max_object_bytes: 1MiB}\n", "m.yaml:7:27: site.policy.max_object_bytes: retired key: write max_object (the name of site.cache.max_object, the cache it models)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("m.yaml", []byte(head+tt.yaml))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
