package zones

import (
	"fmt"
	"log/slog"
)

// redacted stands for a secret in printed and logged configs.
const redacted = "<redacted>"

func redact(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

// String returns the config as %+v shows it, with the admin token, the
// groups' secrets and the TSIG keys' secrets redacted, so that a printed
// or logged Config does not show them.
func (c Config) String() string {
	type plain Config // no String method: no recursion
	p := plain(c)
	p.AdminToken = redact(p.AdminToken)
	return fmt.Sprintf("%+v", p) // the groups and keys redact themselves
}

// LogValue logs the config as String shows it.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// String returns the group as %+v shows it, with its secrets redacted.
func (g GroupConfig) String() string {
	type plain GroupConfig
	p := plain(g)
	p.Secret, p.PreviousSecret = redact(p.Secret), redact(p.PreviousSecret)
	return fmt.Sprintf("%+v", p)
}

// LogValue logs the group as String shows it.
func (g GroupConfig) LogValue() slog.Value { return slog.StringValue(g.String()) }

// String returns the key as %+v shows it, with its secret redacted.
func (k TSIGKey) String() string {
	type plain TSIGKey
	p := plain(k)
	p.Secret = redact(p.Secret)
	return fmt.Sprintf("%+v", p)
}

// LogValue logs the key as String shows it.
func (k TSIGKey) LogValue() slog.Value { return slog.StringValue(k.String()) }
