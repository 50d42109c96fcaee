// Package scheduler holds transmirror's global dispatch policies as pure,
// deterministic functions: the clock and randomness are passed in, so the
// simulator and the tests replay every decision exactly.
package scheduler
