package dnsd

import (
	"context"
	"errors"
	"net/netip"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/zones"
)

// Sentinel errors of the package.
var (
	// ErrNoConfig is returned by Load for a nil set or a set without a config.
	ErrNoConfig = errors.New("dnsd: set has no config")
	// ErrUnknownGroup is returned by StaticGroups for a name that is not a group.
	ErrUnknownGroup = errors.New("dnsd: unknown group")
	// ErrBadTSIGKey is returned by Load for a TSIG key that can not be used.
	ErrBadTSIGKey = errors.New("dnsd: bad tsig key")
)

// Handler is CoreDNS's handler shape. ServeDNS either writes a reply to w
// and returns its rcode, or writes nothing and returns an error rcode
// (SERVFAIL, REFUSED, FORMERR, NOTIMP, ...) for the edge to write with clean
// header flags. A returned error is logged by the edge at debug level.
type Handler interface {
	ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error)
	Name() string
}

// GroupQuery is one question about a group name.
type GroupQuery struct {
	// Group is the group's canonical name.
	Group string
	// Qtype is dns.TypeA or dns.TypeAAAA.
	Qtype uint16
	// Client is the address the query came from.
	Client netip.Addr
	// ECS is the EDNS Client Subnet source prefix (masked), zero if none.
	ECS netip.Prefix
	// Addrs, when not nil, is room for the answer's addresses: an
	// answerer may append to Addrs[:0] and return that, so that a caller
	// with a buffer allocates nothing.
	Addrs []netip.Addr
}

// GroupAnswer is the answer for a group name.
type GroupAnswer struct {
	// Addrs are the addresses to answer with; those of the other family
	// than the query's are ignored.
	Addrs []netip.Addr
	// TTL is the TTL of the answer's records.
	TTL uint32
	// ScopePrefix is the ECS scope prefix length the answer depended on;
	// -1 means no ECS option in the reply.
	ScopePrefix int
}

// GroupAnswerer answers a group name.
type GroupAnswerer interface {
	AnswerGroup(ctx context.Context, q GroupQuery) (GroupAnswer, error)
}

// StaticGroups is the GroupAnswerer that needs no scheduler: each group is
// answered with the addresses of the asked family of its first `answers`
// members (in configuration order) that have one, with TTL = ttl.max. It
// does not depend on the client, so with ECS its scope is 0.
type StaticGroups struct {
	// Set holds the groups.
	Set *zones.Set
}

var _ GroupAnswerer = StaticGroups{}

// DefaultAnswers is how many members a group answer carries when the
// config says 0.
const DefaultAnswers = 2

// AnswerGroup answers q from the static configuration.
func (g StaticGroups) AnswerGroup(_ context.Context, q GroupQuery) (GroupAnswer, error) {
	ans := GroupAnswer{ScopePrefix: -1, Addrs: q.Addrs[:0]}
	if q.ECS.IsValid() {
		ans.ScopePrefix = 0
	}
	var gc *zones.GroupConfig
	if g.Set != nil {
		gc = g.Set.Group(q.Group)
	}
	if gc == nil {
		return ans, ErrUnknownGroup
	}
	n := gc.Answers
	if n <= 0 {
		n = DefaultAnswers
	}
	ans.TTL = gc.TTL.Max
	for _, m := range gc.Members {
		if n == 0 {
			break
		}
		found := false
		for _, a := range m.Addresses {
			a = a.Unmap()
			if (q.Qtype == dns.TypeA && a.Is4()) || (q.Qtype == dns.TypeAAAA && a.Is6()) {
				ans.Addrs = append(ans.Addrs, a)
				found = true
			}
		}
		if found {
			n--
		}
	}
	return ans, nil
}
