// Package acmeclient gets the mirror's own certificate from an ACME CA
// (RFC 8555, through golang.org/x/crypto/acme): one certificate for its
// names (cmd/mirror: the group name and the host name by DNS-01, the host
// name alone by HTTP-01 or TLS-ALPN-01), shared by every HTTPS listener.
//
// A Manager keeps the account key and the certificate with its key in a
// directory (0600 files, written whole or not at all), serves a stored
// certificate that is still valid at once (no round trip to the CA),
// renews at two thirds of the lifetime (earlier by a random twentieth, so
// that mirrors issued together do not renew together), and after a failed
// order retries with backoff while the certificate it has keeps serving.
// Of each authorization the Manager takes the challenge of the configured
// type and a Solver of that type makes it answerable: DNS-01 through
// dnsd's admin API (wired in cmd/mirror), HTTP-01 by HTTP01 (a table of
// tokens served on the plain HTTP listeners), TLS-ALPN-01 by TLSALPN01
// (challenge certificates presented on ALPN acme-tls/1, RFC 8737). An
// answer is removed once the CA has decided, whatever it decided. The
// clock and the randomness are injected.
package acmeclient
