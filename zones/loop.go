package zones

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// maxAliasHops bounds the CNAME chain that hostLoop follows from a
// member's host name; dnsd's own answers follow no longer chains.
const maxAliasHops = 16

// hostLoop says why host, a member's host name, leads back to group (a
// canonical group name), or returns "" when it does not: it is the group's
// name (any case, with or without the trailing dot), or the zones served
// alias it to the group's name through a chain of CNAME records
// (wildcards included). A mirror redirects to its siblings' host names,
// and a host name that is the group's name would send the client to the
// group again: a redirect loop. A chain that leaves the served zones, is
// delegated, loops on itself or runs longer than maxAliasHops is not
// followed further: dnsd does not answer for it.
func (b *builder) hostLoop(host, group string) string {
	name := dns.CanonicalName(host)
	var chain []string
	seen := make(map[string]bool)
	for range maxAliasHops + 1 {
		if name == group {
			if len(chain) == 0 {
				return "is the group's own name"
			}
			return "is an alias of the group's name (" + strings.Join(chain, ", ") + ")"
		}
		if seen[name] {
			return ""
		}
		seen[name] = true
		_, z := b.zoneFor(name)
		if z == nil || z.Cut(name) != "" {
			return ""
		}
		node := z.Node(name)
		if node == nil && !z.Exists(name) {
			node = z.Wildcard(name)
		}
		if node == nil {
			return ""
		}
		cn := node.RRsets[dns.TypeCNAME]
		if len(cn) == 0 {
			return ""
		}
		next := dns.CanonicalName(cn[0].(*dns.CNAME).Target)
		chain = append(chain, fmt.Sprintf("%s CNAME %s", name, next))
		name = next
	}
	return ""
}

// loop refuses a member m of group g whose host name leads back to the
// group (see hostLoop); path is the member's YAML path ("" for a run-time
// member, whose error names the field instead).
func (b *builder) loop(path, gobj string, g *GroupConfig, m *MemberConfig) {
	if m.Host == "" {
		return
	}
	why := b.hostLoop(m.Host, g.Name)
	if why == "" {
		return
	}
	if m.Runtime {
		b.errorf("", "%s: member %q: host: %q %s: redirects to it would loop", gobj, m.Name, m.Host, why)
		return
	}
	b.errorf(path+".host", "%s: member %q: host %q %s: redirects to it would loop", gobj, m.Name, m.Host, why)
}
