package dnsd

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/zones"
)

// checkTSIG returns BADKEY for an unknown key or algorithm, BADTIME or
// BADSIG when miekg's verification failed, success otherwise.
func (s *Server) checkTSIG(snap *snapshot, w dns.ResponseWriter, t *dns.TSIG) int {
	if snap == nil {
		return dns.RcodeBadKey
	}
	k, ok := snap.keys[dns.CanonicalName(t.Hdr.Name)]
	if !ok || k.alg != dns.CanonicalName(t.Algorithm) {
		return dns.RcodeBadKey
	}
	switch err := w.TsigStatus(); {
	case err == nil:
		return dns.RcodeSuccess
	case errors.Is(err, dns.ErrTime):
		return dns.RcodeBadTime
	case errors.Is(err, dns.ErrSecret), errors.Is(err, dns.ErrKeyAlg):
		return dns.RcodeBadKey
	default:
		return dns.RcodeBadSig
	}
}

// tsigProvider signs and verifies with the keys of the current snapshot.
type tsigProvider struct{ s *Server }

func (p tsigProvider) mac(msg []byte, t *dns.TSIG) ([]byte, error) {
	snap := p.s.snap.Load()
	if snap == nil {
		return nil, dns.ErrSecret
	}
	k, ok := snap.keys[dns.CanonicalName(t.Hdr.Name)]
	if !ok {
		return nil, dns.ErrSecret
	}
	if k.alg != dns.CanonicalName(t.Algorithm) {
		return nil, dns.ErrKeyAlg
	}
	h := hmac.New(hashFor(k.alg), k.secret)
	h.Write(msg)
	return h.Sum(nil), nil
}

// Generate returns the MAC of msg.
func (p tsigProvider) Generate(msg []byte, t *dns.TSIG) ([]byte, error) { return p.mac(msg, t) }

// Verify checks the MAC of msg against t.MAC.
func (p tsigProvider) Verify(msg []byte, t *dns.TSIG) error {
	want, err := p.mac(msg, t)
	if err != nil {
		return err
	}
	got, err := hex.DecodeString(t.MAC)
	if err != nil || !hmac.Equal(got, want) {
		return dns.ErrSig
	}
	return nil
}

func hashFor(alg string) func() hash.Hash {
	switch alg {
	case dns.HmacSHA1:
		return sha1.New
	case dns.HmacSHA224:
		return sha256.New224
	case dns.HmacSHA256:
		return sha256.New
	case dns.HmacSHA384:
		return sha512.New384
	case dns.HmacSHA512:
		return sha512.New
	}
	return nil
}

// tsigKeys returns the usable keys by canonical name, or the errors of
// every key that is not.
func tsigKeys(ks []zones.TSIGKey) (map[string]tsigKey, error) {
	keys := make(map[string]tsigKey, len(ks))
	var errs []error
	for _, k := range ks {
		key, err := newTSIGKey(k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		keys[dns.CanonicalName(k.Name)] = key
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return keys, nil
}

// tsigKey is a usable TSIG key.
type tsigKey struct {
	alg    string // canonical algorithm name
	secret []byte
}

func newTSIGKey(k zones.TSIGKey) (tsigKey, error) {
	alg := dns.CanonicalName(k.Algorithm)
	if k.Algorithm == "" {
		alg = dns.HmacSHA256
	}
	if hashFor(alg) == nil {
		return tsigKey{}, fmt.Errorf("%w %q: unsupported algorithm %q", ErrBadTSIGKey, k.Name, k.Algorithm)
	}
	secret, err := base64.StdEncoding.DecodeString(k.Secret)
	if err != nil || len(secret) == 0 {
		return tsigKey{}, fmt.Errorf("%w %q: secret is not base64", ErrBadTSIGKey, k.Name)
	}
	return tsigKey{alg: alg, secret: secret}, nil
}
