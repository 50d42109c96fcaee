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
)
