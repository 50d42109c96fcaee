package yamlconf

import "testing"

func TestIsMemberName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"fra1", true},
		{"nyc-2", true},
		{"-", true},
		{"", false},
		{"FRA1", false},
		{"fra_1", false},
		{"fra.1", false},
		{"frä", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsMemberName(tt.name); got != tt.ok {
				t.Errorf("IsMemberName(%q) = %v, want %v", tt.name, got, tt.ok)
			}
		})
	}
}
