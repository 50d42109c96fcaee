package yamlconf

import "testing"

func TestCheckURL(t *testing.T) {
	tests := []struct {
		name, url, want string // want "" means valid
	}{
		{"http", "http://10.0.0.1:8080/base", ""},
		{"https", "https://dnsd.example.org", ""},
		{"not a URL", "::not a url", `invalid URL "::not a url"`},
		{"other scheme", "ftp://b1", `"ftp://b1": want an http or https URL`},
		{"no host", "http://", `"http://": URL has no host`},
		{"user information", "http://u:p@a", "URL must not carry user information"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckURL(tt.url)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
