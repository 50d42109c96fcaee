package api

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ACMEChallenge is the body of PublishChallenge and RemoveChallenge: the
// name the certificate is for (the group's name or the member's host;
// dnsd serves "_acme-challenge.NAME TXT VALUE") and the value, the
// base64url SHA-256 digest of the key authorization (43 characters). In
// a reply Expires is when dnsd stops serving it by itself.
type ACMEChallenge struct {
	Name    string    `json:"name"`
	Value   string    `json:"value"`
	Expires time.Time `json:"expires,omitzero"`
}

// ACMERemoved is the reply of RemoveChallenge: whether the value was
// live (removing it twice is not an error).
type ACMERemoved struct {
	Removed bool `json:"removed"`
}

// ACMEChallenges is the reply of ListChallenges.
type ACMEChallenges struct {
	Challenges []ACMELive `json:"challenges"`
}

// ACMELive is one live challenge value and whose it is.
type ACMELive struct {
	Group   string    `json:"group"`
	Member  string    `json:"member"`
	Name    string    `json:"name"`
	Value   string    `json:"value"`
	Expires time.Time `json:"expires"`
}

// PublishChallenge asks dnsd to serve an ACME DNS-01 challenge value for
// member of group (signed).
func (c *Client) PublishChallenge(ctx context.Context, group, member string, ch ACMEChallenge) (ACMEChallenge, error) {
	body, err := json.Marshal(ACMEChallenge{Name: ch.Name, Value: ch.Value})
	if err != nil {
		return ACMEChallenge{}, fmt.Errorf("%w: %w", ErrRequest, err)
	}
	var out ACMEChallenge
	err = c.do(ctx, call{route: PublishChallenge, values: []string{group, member}, body: body, signed: true}, &out)
	return out, err
}

// RemoveChallenge stops serving member's value (signed).
func (c *Client) RemoveChallenge(ctx context.Context, group, member string, ch ACMEChallenge) (ACMERemoved, error) {
	body, err := json.Marshal(ACMEChallenge{Name: ch.Name, Value: ch.Value})
	if err != nil {
		return ACMERemoved{}, fmt.Errorf("%w: %w", ErrRequest, err)
	}
	var out ACMERemoved
	err = c.do(ctx, call{route: RemoveChallenge, values: []string{group, member}, body: body, signed: true}, &out)
	return out, err
}

// Challenges returns the live ACME challenges.
func (c *Client) Challenges(ctx context.Context) (ACMEChallenges, error) {
	var out ACMEChallenges
	err := c.do(ctx, call{route: ListChallenges}, &out)
	return out, err
}
