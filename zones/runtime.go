package zones

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/zones/yamlconf"
)

// WithMembers returns a Set like s whose groups also hold the run-time
// members in extra (group name → members, added through the admin API),
// checked with the rules of the members of the config file and those of
// untrusted input (globally reachable addresses unless the group has
// allow_private, host names, bounds; see untrusted), at most
// max_runtime_members of them in a group, and marked Runtime. s is not changed; zones are shared. An unknown group, a
// name that is already a member, or an invalid member is an error that
// names the group and the member.
func (s *Set) WithMembers(extra map[string][]MemberConfig) (*Set, error) {
	c := cloneConfig(s.Config)
	// Errors about run-time members name no position in the file.
	b := &builder{c: c, zones: make(map[string]*Zone, len(s.Zones)), errs: yamlconf.NewErrors("", nil, "zones")}
	for _, z := range s.Zones {
		b.zones[z.Origin] = z // for host names that alias the group (loop)
	}
	index := make(map[string]int, len(c.Groups))
	for i, g := range c.Groups {
		index[g.Name] = i
	}
	names := slices.Collect(maps.Keys(extra))
	sort.Strings(names)
	for _, name := range names {
		gname := dns.CanonicalName(name)
		i, ok := index[gname]
		if !ok {
			b.errs.Add(fmt.Errorf("zones: group %q: %w", gname, ErrUnknownGroup))
			continue
		}
		g := &c.Groups[i]
		obj := fmt.Sprintf("group %q", g.Name)
		for _, m := range extra[name] {
			m.Addresses = slices.Clone(m.Addresses)
			m.Location = m.Location.Clone()
			m.Runtime = true
			before := b.errs.Len()
			b.member("", obj, &m)
			if b.errs.Len() == before {
				b.untrusted(obj, g, &m)
				b.loop("", obj, g, &m)
			}
			if b.errs.Len() > before {
				continue
			}
			if slices.ContainsFunc(g.Members, func(x MemberConfig) bool { return x.Name == m.Name }) {
				b.errs.Add(fmt.Errorf("zones: %s: member %q: %w", obj, m.Name, ErrDuplicateMember))
				continue
			}
			if len(g.Members) >= MaxGroupMembers {
				b.errs.Add(fmt.Errorf("zones: %s: member %q: %w: the group has %d members, the most a group may have", obj, m.Name, ErrTooManyMembers, len(g.Members)))
				continue
			}
			if n := g.runtimeMembers(); n >= g.MaxRuntimeMembers {
				b.errs.Add(fmt.Errorf("zones: %s: member %q: %w: the group has %d, max_runtime_members is %d", obj, m.Name, ErrTooManyMembers, n, g.MaxRuntimeMembers))
				continue
			}
			g.Members = append(g.Members, m)
		}
	}
	if err := b.errs.Err(); err != nil {
		return nil, err
	}
	out := &Set{Config: c, Zones: s.Zones, MMDB: s.MMDB, StateFile: s.StateFile, Groups: make(map[string]*GroupConfig, len(c.Groups))}
	for i := range c.Groups {
		out.Groups[c.Groups[i].Name] = &c.Groups[i]
	}
	return out, nil
}

// Errors of run-time membership.
var (
	// ErrUnknownGroup: the group is not in the configuration.
	ErrUnknownGroup = errors.New("unknown group")
	// ErrDuplicateMember: the group already has a member of that name.
	ErrDuplicateMember = errors.New("already a member")
	// ErrTooManyMembers: the group has max_runtime_members run-time
	// members already.
	ErrTooManyMembers = errors.New("too many run-time members")
)

// runtimeMembers counts the members of g added at run time.
func (g *GroupConfig) runtimeMembers() int {
	n := 0
	for _, m := range g.Members {
		if m.Runtime {
			n++
		}
	}
	return n
}
