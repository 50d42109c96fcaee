package zones

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// ErrNeedsRestart: a reload changed a key that only a restart applies.
var ErrNeedsRestart = errors.New("needs a restart")

// RestartChanges returns an error for every key that dnsd can not apply
// on a reload and that next changes from cur: the DNS listen addresses,
// the admin address, whether the admin listener has TLS, its limits,
// health.ca_file (its path or its contents) and the cluster block, all set
// when the sockets and clients are made at start. Every other key is
// applied by a reload (admin_tls's files are read again). Each error names where next writes the key
// and both values, e.g.
//
//	dnsd.yaml:2:1: listen: changed from [127.0.0.1:53] to [127.0.0.1:5353]: needs a restart
//
// and wraps ErrNeedsRestart; nil means next can be reloaded.
func RestartChanges(cur, next *Config) error {
	var errs []error
	changed := func(key string, a, b any) {
		where := next.File
		if pos, ok := next.pos.Of(key); ok && where != "" {
			where += ":" + pos.String()
		}
		errs = append(errs, fmt.Errorf("%s: %s: changed from %v to %v: %w", where, key, a, b, ErrNeedsRestart))
	}
	if !slices.Equal(cur.Listen, next.Listen) {
		changed("listen", cur.Listen, next.Listen)
	}
	if cur.Server.UDPSockets != next.Server.UDPSockets {
		changed("server.udp_sockets", cur.Server.UDPSockets, next.Server.UDPSockets)
	}
	if cur.Admin != next.Admin {
		changed("admin", fmt.Sprintf("%q", cur.Admin), fmt.Sprintf("%q", next.Admin))
	}
	if cur.AdminTLS.Enabled() != next.AdminTLS.Enabled() {
		changed("admin_tls", onOff(cur.AdminTLS.Enabled()), onOff(next.AdminTLS.Enabled()))
	}
	if !slices.Equal(cur.AdminHosts, next.AdminHosts) {
		changed("admin_hosts", cur.AdminHosts, next.AdminHosts)
	}
	if cur.AdminLimits != next.AdminLimits {
		changed("limits", fmt.Sprintf("%+v", cur.AdminLimits), fmt.Sprintf("%+v", next.AdminLimits))
	}
	if cur.Health.CAFile != next.Health.CAFile || !bytes.Equal(cur.Health.caPEM, next.Health.caPEM) {
		changed("health.ca_file", fmt.Sprintf("%q", cur.Health.CAFile), fmt.Sprintf("%q (%d bytes)", next.Health.CAFile, len(next.Health.caPEM)))
	}
	if !reflect.DeepEqual(cur.Cluster, next.Cluster) {
		changed("cluster", fmt.Sprintf("%+v", cur.Cluster), fmt.Sprintf("%+v", next.Cluster))
	}
	return errors.Join(errs...)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
