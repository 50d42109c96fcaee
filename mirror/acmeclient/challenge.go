package acmeclient

import (
	"context"
	"crypto/tls"
	"fmt"

	"golang.org/x/crypto/acme"
)

// Challenge types (RFC 8555 §8.3, §8.4; RFC 8737): Options.Challenge and
// the bounded values of the orders metric's challenge label.
const (
	ChallengeDNS01     = "dns-01"      // a TXT record at _acme-challenge.NAME
	ChallengeHTTP01    = "http-01"     // http://NAME/.well-known/acme-challenge/TOKEN on port 80
	ChallengeTLSALPN01 = "tls-alpn-01" // a certificate for NAME on ALPN acme-tls/1, port 443
)

// Challenge is one challenge of an authorization, made answerable by a
// Solver of its type. It is comparable: Remove is given what Publish was.
type Challenge struct {
	Type  string // ChallengeDNS01, ChallengeHTTP01 or ChallengeTLSALPN01
	Name  string // the identifier: what the CA validates, as "fra1.example.org"
	Token string // the CA's token
	// Value is what the CA must find: DNS-01, the TXT value at
	// _acme-challenge.Name; HTTP-01, the key authorization (RFC 8555
	// §8.1), the body at /.well-known/acme-challenge/Token.
	Value string
	// Cert is TLS-ALPN-01's: the certificate for Name with the key
	// authorization's digest in its acmeIdentifier extension.
	Cert *tls.Certificate
}

// Solver makes challenges of one type answerable: Publish returns once
// the CA can find ch (a DNS-01 Solver: once dnsd serves it); Remove stops
// answering it.
type Solver interface {
	Publish(ctx context.Context, ch Challenge) error
	Remove(ctx context.Context, ch Challenge) error
}

// validChallenge reports whether typ is one of the challenge types.
func validChallenge(typ string) bool {
	return typ == ChallengeDNS01 || typ == ChallengeHTTP01 || typ == ChallengeTLSALPN01
}

// prepare is the Challenge of ch (of the Manager's type) for name: its
// answer made with the account key of cl.
func prepare(cl *acme.Client, name string, ch *acme.Challenge) (Challenge, error) {
	c := Challenge{Type: ch.Type, Name: name, Token: ch.Token}
	var err error
	switch ch.Type {
	case ChallengeDNS01:
		c.Value, err = cl.DNS01ChallengeRecord(ch.Token)
	case ChallengeHTTP01:
		c.Value, err = cl.HTTP01ChallengeResponse(ch.Token)
	case ChallengeTLSALPN01:
		var cert tls.Certificate
		cert, err = cl.TLSALPN01ChallengeCert(ch.Token, name)
		c.Cert = &cert
	default:
		err = fmt.Errorf("challenge type %q", ch.Type)
	}
	if err != nil {
		return Challenge{}, fmt.Errorf("%w: %s: %w", ErrOrder, name, err)
	}
	return c, nil
}
