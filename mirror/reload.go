package mirror

import (
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler/geo"
)

// Reload is a prepared change of a running Mirror's configuration: what
// can fail (the restart-only keys, the GeoIP database, the rules) is
// done; Commit swaps it in. Build it with PrepareReload.
type Reload struct {
	m     *Mirror
	cfg   *Config
	rules group.RedirectRules
	loc   *geo.Locator
}

// PrepareReload prepares the reload of cfg, a config from ParseConfig
// (with the same command-line overrides as the running one): it checks
// that cfg changes no key that needs a restart (see RestartChanges),
// opens the GeoIP database and builds the redirect rules. Nothing that
// serves changes until Commit. Run one reload at a time.
func (m *Mirror) PrepareReload(cfg *Config) (*Reload, error) {
	if err := RestartChanges(m.cfg.Load(), cfg); err != nil {
		return nil, err
	}
	if err := probe.CheckCapacity(cfg.Capacity); err != nil {
		return nil, fmt.Errorf("mirror: %s: capacity: %w", cfg.File, err)
	}
	if err := probe.CheckBandwidth(cfg.Bandwidth.BytesPerSecond()); err != nil {
		return nil, fmt.Errorf("mirror: %s: bandwidth: %w", cfg.File, err)
	}
	loc, err := geo.FromConfig(cfg.Geo)
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	return &Reload{m: m, cfg: cfg, rules: RedirectRulesFromConfig(cfg), loc: loc}, nil
}

// Commit makes the prepared configuration the running one: the capacity
// and bandwidth of the load reports and of the utilization that the
// redirects follow,
// the redirect rules, the client locator and the config the status page
// shows, each one atomic swap. It can not fail.
func (r *Reload) Commit() {
	r.m.p.Reporter.SetCapacity(r.cfg.Capacity)
	r.m.p.Reporter.SetBandwidth(r.cfg.Bandwidth.BytesPerSecond())
	r.m.p.Meter.SetLimits(r.cfg.Capacity, r.cfg.Bandwidth.BytesPerSecond())
	r.m.p.Redirector.SetRules(r.rules, r.loc)
	r.m.cfg.Store(r.cfg)
}

// reloadable reports whether a running mirror takes a change of the key
// at path (e.g. "redirect.max_share", "geo.networks[0].prefix") on a
// reload: the capacity and the bandwidth, the redirect rules (but
// redirect.time_constant) and the host name and trusted_proxies in them,
// geo and location,
// and admin_tls's and tls.certificates' files (read again by the reload). Everything else is built once, at the start, so a
// key added later needs a restart until it is made reloadable here.
func reloadable(path string) bool {
	switch path {
	case "redirect.time_constant":
		return false // the flow meter and the view's bookings are built with it
	case "admin_tls.cert_file", "admin_tls.key_file":
		return true // read again by every reload; RestartChanges refuses TLS on or off
	}
	if path == "tls.certificates" || strings.HasPrefix(path, "tls.certificates[") {
		return true // read again by every reload; tls.listen needs a restart
	}
	top, _, _ := strings.Cut(path, ".")
	top, _, _ = strings.Cut(top, "[")
	switch top {
	case "host", "capacity", "bandwidth", "redirect", "trusted_proxies", "geo", "location":
		return true
	}
	return false
}

// RestartChanges compares next, a new config, with cur, the running one,
// and returns an error for every changed key that a running mirror can
// not take on reload (the listen and admin addresses, group, member, the
// role and its content: root, backends, dispatcher, site, listing; dnsd,
// timeouts, load_window), each naming the key and both values (secrets
// are not shown), e.g.
//
//	mirror.yaml: listen: changed from ["127.0.0.1:8080"] to ["127.0.0.1:8081"]: needs a restart
//
// Each wraps ErrNeedsRestart; nil means next can be reloaded.
func RestartChanges(cur, next *Config) error {
	var errs []error
	if was, is := cur.AdminTLS.Enabled(), next.AdminTLS.Enabled(); was != is {
		errs = append(errs, fmt.Errorf("%s: admin_tls: changed from %s to %s: %w", next.File, onOff(was), onOff(is), ErrNeedsRestart))
	}
	diffKeys("", reflect.ValueOf(*cur), reflect.ValueOf(*next), func(path string, a, b reflect.Value) {
		if reloadable(path) {
			return
		}
		last := path[strings.LastIndexByte(path, '.')+1:]
		if last == "secret" {
			errs = append(errs, fmt.Errorf("%s: %s: changed: %w", next.File, path, ErrNeedsRestart))
			return
		}
		errs = append(errs, fmt.Errorf("%s: %s: changed from %s to %s: %w", next.File, path, show(a), show(b), ErrNeedsRestart))
	})
	return errors.Join(errs...)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// diffKeys calls changed for every key under path whose value differs
// between a and b: structs by their YAML keys, lists of objects entry by
// entry when both have as many, anything else as one value.
func diffKeys(path string, a, b reflect.Value, changed func(path string, a, b reflect.Value)) {
	if reflect.DeepEqual(a.Interface(), b.Interface()) {
		return
	}
	switch {
	case isObject(a.Type()):
		for i := range a.NumField() {
			key := yamlKey(a.Type().Field(i))
			if key == "" {
				continue
			}
			if path != "" {
				key = path + "." + key
			}
			diffKeys(key, a.Field(i), b.Field(i), changed)
		}
		return
	case a.Kind() == reflect.Slice && isObject(a.Type().Elem()):
		if a.Len() == b.Len() {
			for i := range a.Len() {
				diffKeys(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), changed)
			}
			return
		}
	}
	changed(path, a, b)
}

// isObject reports whether t is a struct written as a YAML mapping (one
// with yaml-tagged fields), not a value such as netip.Prefix.
func isObject(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if yamlKey(t.Field(i)) != "" {
			return true
		}
	}
	return false
}

// yamlKey is the YAML key of a struct field, "" for fields not in YAML.
func yamlKey(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// show writes a config value for an error message.
func show(v reflect.Value) string {
	if tm, ok := v.Interface().(encoding.TextMarshaler); ok && !(v.Kind() == reflect.Pointer && v.IsNil()) {
		if b, err := tm.MarshalText(); err == nil {
			return string(b)
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "none"
		}
		return show(v.Elem())
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Slice:
		if isObject(v.Type().Elem()) {
			return fmt.Sprintf("%d entries", v.Len())
		}
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = show(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v.Interface())
}
