package yamlconf

import (
	"errors"
	"fmt"
	"net/url"
)

// CheckURL accepts an absolute http or https URL with a host and without
// user information, as the URLs of both config files are written (dnsd's
// URL in mirror.yaml, a site's back ends). Its errors say what is wrong
// with s, for a KeyErrorf at the key it was written at.
func CheckURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("invalid URL %q", s)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http or https URL", s)
	case u.Host == "":
		return fmt.Errorf("%q: URL has no host", s)
	case u.User != nil:
		return errors.New("URL must not carry user information")
	}
	return nil
}
