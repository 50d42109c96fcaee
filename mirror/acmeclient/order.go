package acmeclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/crypto/acme"
)

// removeTimeout bounds the removal of a challenge value, on a context
// of its own: it is removed even when the order's context has ended.
const removeTimeout = 10 * time.Second

// accountClient is the CA's client with the registered account.
type accountClient struct{ *acme.Client }

// client returns the client of the account, registering it (or finding
// it registered, by its key) on the first call.
func (m *Manager) client(ctx context.Context) (*accountClient, error) {
	m.mu.Lock()
	a := m.account
	m.mu.Unlock()
	if a != nil {
		return a, nil
	}
	key, err := m.store.accountKey()
	if err != nil {
		return nil, err
	}
	cl := &acme.Client{Key: key, HTTPClient: m.o.HTTP, DirectoryURL: m.o.Directory, UserAgent: "transmirror-mirror"}
	acct := &acme.Account{}
	if m.o.Email != "" {
		acct.Contact = []string{"mailto:" + m.o.Email}
	}
	if _, err := cl.Register(ctx, acct, acme.AcceptTOS); err != nil && !errors.Is(err, acme.ErrAccountAlreadyExists) {
		return nil, fmt.Errorf("%w: account: %w", ErrOrder, err)
	}
	a = &accountClient{cl}
	m.mu.Lock()
	m.account = a
	m.mu.Unlock()
	return a, nil
}

// order runs one order for the names (RFC 8555 §7.4): every pending
// authorization through the challenge of the configured type, then the
// finalization with a CSR of key; it returns the chain, DER, leaf first.
func (m *Manager) order(ctx context.Context, key *ecdsa.PrivateKey) ([][]byte, error) {
	cl, err := m.client(ctx)
	if err != nil {
		return nil, err
	}
	o, err := cl.AuthorizeOrder(ctx, acme.DomainIDs(m.o.Names...))
	if err != nil {
		return nil, fmt.Errorf("%w: new order: %w", ErrOrder, err)
	}
	for _, u := range o.AuthzURLs {
		if err := m.authorize(ctx, cl, u); err != nil {
			return nil, err
		}
	}
	if o, err = cl.WaitOrder(ctx, o.URI); err != nil {
		return nil, fmt.Errorf("%w: order: %w", ErrOrder, err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: m.o.Names}, key)
	if err != nil {
		return nil, fmt.Errorf("%w: csr: %w", ErrOrder, err)
	}
	chain, _, err := cl.CreateOrderCert(ctx, o.FinalizeURL, csr, true)
	if err != nil {
		return nil, fmt.Errorf("%w: finalize: %w", ErrOrder, err)
	}
	return chain, nil
}

// authorize answers the authorization at url by its challenge of the
// configured type unless it is valid already: make the answer
// answerable, ask the CA to validate, wait for its decision, and remove
// the answer whatever it was.
func (m *Manager) authorize(ctx context.Context, cl *accountClient, url string) error {
	z, err := cl.GetAuthorization(ctx, url)
	if err != nil {
		return fmt.Errorf("%w: authorization: %w", ErrOrder, err)
	}
	if z.Status == acme.StatusValid {
		return nil
	}
	name := z.Identifier.Value
	i := slices.IndexFunc(z.Challenges, func(c *acme.Challenge) bool { return c.Type == m.o.Challenge })
	if i < 0 {
		return fmt.Errorf("%w: %s: the CA offers no %s challenge", ErrOrder, name, m.o.Challenge)
	}
	ch, err := prepare(cl.Client, name, z.Challenges[i])
	if err != nil {
		return err
	}
	defer m.remove(ctx, ch) // also after a Publish that failed half-way (taken, never seen served)
	if err := m.o.Solver.Publish(ctx, ch); err != nil {
		return fmt.Errorf("%w: %s: publish the challenge: %w", ErrOrder, name, err)
	}
	if _, err := cl.Accept(ctx, z.Challenges[i]); err != nil {
		return fmt.Errorf("%w: %s: accept: %w", ErrOrder, name, err)
	}
	if _, err := cl.WaitAuthorization(ctx, z.URI); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrOrder, name, err)
	}
	return nil
}

// remove stops answering a challenge, on a bounded context of its own;
// a failure is logged (dnsd drops a DNS-01 value by itself later).
func (m *Manager) remove(ctx context.Context, ch Challenge) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	if err := m.o.Solver.Remove(ctx, ch); err != nil {
		m.o.Logger.Warn("acme challenge not removed", "name", ch.Name, "challenge", ch.Type, "err", err)
	}
}

func pemChain(chain [][]byte) []byte {
	var out []byte
	for _, c := range chain {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c})...)
	}
	return out
}

func pemKey(key *ecdsa.PrivateKey) []byte {
	der, _ := x509.MarshalECPrivateKey(key) // a P-256 key always marshals
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
