// Package acme is dnsd's side of the ACME DNS-01 challenge (RFC 8555
// §8.4): a member of a group asks, over the signed admin API, for
// "_acme-challenge.NAME. TXT VALUE" to be served for a name it is
// entitled to, and for it to go again once its CA has looked.
//
// The threat model: a request is signed with the group's secret, so the
// asker holds it; it may still be a member that tries to get a
// certificate for a name that is not its own (another member's host, a
// name of the zone that is no mirror's), or one that floods. So a member
// may publish only for the group's name and its own host, inside a served
// zone and above no delegation (Entitled); it keeps at most
// MaxValuesPerMember live values; each value expires ChallengeTTL after
// it was last published whether or not it is removed; and each member has
// a token bucket of RequestBurst requests refilled one every RequestEvery,
// beyond which requests are refused and change nothing. A member removed
// from its group loses its values at once (they are no longer served) and
// from the Store at the next sweep.
//
// The Book keeps nothing itself: the live challenges are in a Store,
// Memory for a single node (they are short-lived, so no state file keeps
// them: a restart loses them and the ACME client retries) or the NS set's
// acme/ key family (package cluster) so that every node serves the same.
// Time is passed in (Options.Now).
package acme

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/zones"
)

// Fixed limits (documented in docs/acme.md; no config keys).
const (
	// ChallengeTTL is how long a value lives after it was published if
	// it is never removed.
	ChallengeTTL = 10 * time.Minute
	// MaxValuesPerMember bounds a member's live values, all names together.
	MaxValuesPerMember = 4
	// RequestBurst is how many requests a member may make at once.
	RequestBurst = 10
	// RequestEvery is how often a member's bucket gains a request.
	RequestEvery = 6 * time.Second
	// SweepInterval is how often Run drops expired and orphaned values.
	SweepInterval = 10 * time.Second
	// ValueLen is the length of a value: the base64url (unpadded)
	// SHA-256 digest of a key authorization.
	ValueLen = 43
	// Label is the first label of a challenge name.
	Label = "_acme-challenge"
)

// Sentinel errors of the package.
var (
	// ErrInvalid is a malformed name or value.
	ErrInvalid = errors.New("acme: invalid challenge")
	// ErrForbidden is a name the member is not entitled to.
	ErrForbidden = errors.New("acme: forbidden")
	// ErrLimited is a request beyond the member's rate or live values.
	ErrLimited = errors.New("acme: limited")
	// ErrUnavailable is a Store that can not be written now (an NS set
	// without etcd).
	ErrUnavailable = errors.New("acme: store unavailable")
)

// Results are the values of the result label of
// transmirror_dnsd_acme_challenges_total.
var Results = [...]string{"published", "removed", "forbidden", "invalid", "limited"}

// Challenge is one live value: member of group asks for
// "_acme-challenge.Name TXT Value" until Expires.
type Challenge struct {
	Group   string    `json:"group"`  // canonical
	Member  string    `json:"member"` // its name in the group
	Name    string    `json:"name"`   // canonical, without the Label
	Value   string    `json:"value"`
	Expires time.Time `json:"expires"`
}

// Key identifies a challenge: group, member, name and value.
func (c Challenge) Key() string { return c.Group + "/" + c.Member + "/" + c.Name + "/" + c.Value }

// hostChars are the characters of a name a certificate is for.
const hostChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."

// Validate checks a request's name and value and returns the name in
// canonical form: a domain name of at most 253 ASCII letters, digits, '-', '_'
// and '.' (no wildcard) or the Label (the name the certificate is for), and a value of
// ValueLen base64url characters that decode to 32 bytes.
func Validate(name, value string) (string, error) {
	if len(value) != ValueLen {
		return "", fmt.Errorf("%w: value: want %d base64url characters, have %d", ErrInvalid, ValueLen, len(value))
	}
	if b, err := base64.RawURLEncoding.Strict().DecodeString(value); err != nil || len(b) != 32 {
		return "", fmt.Errorf("%w: value: want the base64url SHA-256 digest of a key authorization", ErrInvalid)
	}
	if name == "" || len(strings.TrimSuffix(name, ".")) > 253 || strings.Trim(name, hostChars) != "" {
		return "", fmt.Errorf("%w: name %q: want a domain name of letters, digits, '-', '_' and '.', without a wildcard", ErrInvalid, name)
	}
	if _, ok := dns.IsDomainName(name); !ok {
		return "", fmt.Errorf("%w: name %q: want a domain name", ErrInvalid, name)
	}
	c := dns.CanonicalName(name)
	if dns.CountLabel(c) == 0 || strings.HasPrefix(c, Label+".") {
		return "", fmt.Errorf("%w: name %q: want the name the certificate is for, not the challenge's", ErrInvalid, name)
	}
	if len(c) > 253-len(Label) {
		return "", fmt.Errorf("%w: name %q: too long for the challenge label", ErrInvalid, name)
	}
	return c, nil
}

// Entitled tells whether member of group may publish for name (canonical)
// in set: name must be the group's name or the member's own host, lie in
// one of set's zones, and not at or below a delegation in it. The error
// says why not (ErrForbidden).
func Entitled(set *zones.Set, group, member, name string) error {
	if set == nil {
		return fmt.Errorf("%w: no configuration", ErrForbidden)
	}
	g := set.Group(group)
	if g == nil {
		return fmt.Errorf("%w: no group %q", ErrForbidden, group)
	}
	var m *zones.MemberConfig
	for i := range g.Members {
		if g.Members[i].Name == member {
			m = &g.Members[i]
			break
		}
	}
	if m == nil {
		return fmt.Errorf("%w: group %s has no member %q", ErrForbidden, g.Name, member)
	}
	if name != dns.CanonicalName(g.Name) && (m.Host == "" || name != dns.CanonicalName(m.Host)) {
		return fmt.Errorf("%w: %s is neither group %s nor member %s's host", ErrForbidden, name, g.Name, member)
	}
	z := set.Find(Label + "." + name)
	if z == nil {
		return fmt.Errorf("%w: %s is in no zone of this server", ErrForbidden, name)
	}
	if cut := z.Cut(Label + "." + name); cut != "" {
		return fmt.Errorf("%w: %s is delegated away at %s", ErrForbidden, name, cut)
	}
	return nil
}

// ChallengeName returns the name a challenge for qname is asked for at,
// qname without its first Label, or "" when qname is not one.
func ChallengeName(qname string) string {
	if len(qname) <= len(Label)+1 || !strings.EqualFold(qname[:len(Label)+1], Label+".") {
		return ""
	}
	return dns.CanonicalName(qname[len(Label)+1:])
}
