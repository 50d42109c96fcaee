// Package acmeclient gets the mirror's own certificate from an ACME CA
// (RFC 8555, through golang.org/x/crypto/acme): one certificate for the
// group name and the host name, shared by every HTTPS listener.
//
// A Manager keeps the account key and the certificate with its key in a
// directory (0600 files, written whole or not at all), serves a stored
// certificate that is still valid at once (no round trip to the CA),
// renews at two thirds of the lifetime (earlier by a random twentieth, so
// that mirrors issued together do not renew together), and after a failed
// order retries with backoff while the certificate it has keeps serving.
// The DNS-01 challenge is answered by a Solver (dnsd's admin API, wired in
// cmd/mirror); its values are removed once the CA has decided, whatever it
// decided. The clock and the randomness are injected.
package acmeclient
