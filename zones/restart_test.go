package zones

import (
	"errors"
	"strings"
	"testing"
)

func TestRestartChanges(t *testing.T) {
	const cur = "listen: [\"127.0.0.1:53\"]\nadmin: 127.0.0.1:8053\nhealth: {fall: 3}\n"
	tests := []struct {
		name string
		next string
		want []string // substrings of the error; none: reloadable
	}{
		{"same", cur, nil},
		{"other keys only", "listen: [\"127.0.0.1:53\"]\nadmin: 127.0.0.1:8053\nhealth: {fall: 5}\n", nil},
		{"listen", "listen: [\"127.0.0.1:5353\"]\nadmin: 127.0.0.1:8053\n",
			[]string{"next.yaml:1:1: listen: changed from [127.0.0.1:53] to [127.0.0.1:5353]: needs a restart"}},
		{"admin removed", "listen: [\"127.0.0.1:53\"]\n",
			[]string{`next.yaml: admin: changed from "127.0.0.1:8053" to "": needs a restart`}},
		{"udp sockets", "listen: [\"127.0.0.1:53\"]\nadmin: 127.0.0.1:8053\nserver: {udp_sockets: 4}\n",
			[]string{"next.yaml:3:10: server.udp_sockets: changed from 0 to 4: needs a restart"}},
		{"admin_tls on", cur + "admin_tls: {cert_file: a.crt, key_file: a.key}\n",
			[]string{"next.yaml:4:1: admin_tls: changed from off to on: needs a restart"}},
		{"admin_limits", cur + "admin_limits: {max_conns_per_client: 8}\n",
			[]string{"next.yaml:4:1: admin_limits: changed from"}},
		{"both", "listen: [\"127.0.0.1:53\", \"[::1]:53\"]\nadmin: 127.0.0.1:9053\n",
			[]string{"next.yaml:1:1: listen: changed", "next.yaml:2:1: admin: changed"}},
	}
	// A running config with TLS takes new certificate files.
	withTLS := cur + "admin_tls: {cert_file: a.crt, key_file: a.key}\n"
	tlsA, err := Parse("cur.yaml", []byte(withTLS))
	if err != nil {
		t.Fatal(err)
	}
	tlsB, err := Parse("next.yaml", []byte(strings.ReplaceAll(withTLS, "a.", "b.")))
	if err != nil {
		t.Fatal(err)
	}
	if err := RestartChanges(tlsA, tlsB); err != nil {
		t.Errorf("new admin_tls files: %v, want reloadable", err)
	}
	a, err := Parse("cur.yaml", []byte(cur))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Parse("next.yaml", []byte(tt.next))
			if err != nil {
				t.Fatal(err)
			}
			err = RestartChanges(a, b)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("RestartChanges = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrNeedsRestart) {
				t.Fatalf("RestartChanges = %v, want ErrNeedsRestart", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
