package api

import "errors"

// Sentinel errors; the errors returned by this package wrap one of them.
var (
	// ErrNoSignature is returned for a request without a signature header.
	ErrNoSignature = errors.New("api: missing signature")
	// ErrMalformedSignature is returned for a signature header that does
	// not parse.
	ErrMalformedSignature = errors.New("api: malformed signature")
	// ErrBadSignature is returned when the MAC does not match.
	ErrBadSignature = errors.New("api: signature mismatch")
	// ErrSignatureExpired is returned for a timestamp older than the window.
	ErrSignatureExpired = errors.New("api: signature timestamp too old")
	// ErrSignatureFuture is returned for a timestamp further ahead than the
	// window.
	ErrSignatureFuture = errors.New("api: signature timestamp in the future")
	// ErrReplayed is returned for a signature already accepted in its window.
	ErrReplayed = errors.New("api: signature replayed")
	// ErrReplayCacheFull is returned when a Verifier holds MaxEntries live
	// signatures and so can not remember another one.
	ErrReplayCacheFull = errors.New("api: replay cache full")

	// ErrStatus is wrapped by every StatusError: the server answered with a
	// status other than 2xx.
	ErrStatus = errors.New("api: error status")
	// ErrTransport is returned when a request got no answer: the
	// connection failed, the context ended, the body broke off.
	ErrTransport = errors.New("api: no answer")
	// ErrResponse is returned for an answer that is too large or not the
	// JSON the route returns.
	ErrResponse = errors.New("api: bad answer")
	// ErrTooLarge is returned, together with ErrResponse, for an answer
	// whose body is larger than the client's MaxResponse.
	ErrTooLarge = errors.New("api: answer too large")
	// ErrRequest is returned, before anything is sent, for a request that
	// can not be made: a body that does not marshal (a NaN), a bad URL.
	ErrRequest = errors.New("api: bad request")
	// ErrNoSecret is returned, before anything is sent, for a signed call
	// on a Client without a secret.
	ErrNoSecret = errors.New("api: no secret to sign with")
	// ErrBadURL is returned by NewClient for a base URL that is not an
	// absolute http or https URL.
	ErrBadURL = errors.New("api: bad base URL")
)
