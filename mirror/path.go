package mirror

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Errors of CleanPath.
var (
	// ErrBadPath is a request path that is malformed or could name
	// something outside the document root; it is answered with 400.
	ErrBadPath = errors.New("mirror: bad request path")
	// ErrHiddenPath is a request path with a segment starting with "."
	// (other than a leading /.well-known); it is answered with 404, as if
	// it did not exist.
	ErrHiddenPath = errors.New("mirror: hidden request path")
)

// Limits on request paths: longer ones are refused with ErrBadPath.
const (
	maxPathLen    = 4096
	maxSegmentLen = 255
)

// CleanPath validates the escaped path of a request (r.URL.EscapedPath())
// and returns the slash-separated name it denotes relative to the document
// root, without leading or trailing slash ("." for the root itself), and
// whether it ended in "/". It never returns a name that could leave the
// root, and it refuses rather than repairs:
//
//   - a path not starting with "/", longer than 4096 bytes or with a
//     segment longer than 255 bytes;
//   - empty segments ("//"), "." and ".." segments, also when encoded
//     (%2e%2e), since a client that sends them is either broken or hostile;
//   - encoded slashes and backslashes (%2F, %5C), raw backslashes, NUL and
//     other control characters, invalid escapes and invalid or overlong
//     UTF-8 (%c0%ae) after decoding;
//   - a segment that is a Windows drive ("C:") or that the OS could not
//     use as a local name (filepath.Localize);
//
// all with ErrBadPath. Segments starting with "." (dot-files such as
// .git or .htaccess, and "..;") are refused with ErrHiddenPath, except a
// first segment ".well-known" (RFC 8615). Percent-decoding is done once:
// "%252e" is the literal name "%2e".
func CleanPath(escaped string) (name string, isDir bool, err error) {
	if len(escaped) > maxPathLen {
		return "", false, fmt.Errorf("%w: longer than %d bytes", ErrBadPath, maxPathLen)
	}
	rest, ok := strings.CutPrefix(escaped, "/")
	if !ok {
		return "", false, fmt.Errorf("%w: does not start with /", ErrBadPath)
	}
	if rest == "" {
		return ".", true, nil
	}
	raw := strings.Split(rest, "/")
	if raw[len(raw)-1] == "" {
		isDir = true
		raw = raw[:len(raw)-1]
	}
	segs := make([]string, 0, len(raw))
	for i, r := range raw {
		seg, err := cleanSegment(r)
		if err != nil {
			return "", false, err
		}
		if seg[0] == '.' && (i > 0 || seg != ".well-known") {
			return "", false, fmt.Errorf("%w: segment starts with a dot", ErrHiddenPath)
		}
		segs = append(segs, seg)
	}
	name = strings.Join(segs, "/")
	if _, err := filepath.Localize(name); err != nil {
		return "", false, fmt.Errorf("%w: not a local name", ErrBadPath)
	}
	return name, isDir, nil
}

// cleanSegment decodes and checks one path segment.
func cleanSegment(raw string) (string, error) {
	if raw == "" {
		return "", fmt.Errorf("%w: empty segment", ErrBadPath)
	}
	seg, err := url.PathUnescape(raw)
	if err != nil {
		return "", fmt.Errorf("%w: invalid escape", ErrBadPath)
	}
	switch {
	case seg == "." || seg == "..":
		return "", fmt.Errorf("%w: dot segment", ErrBadPath)
	case len(seg) > maxSegmentLen:
		return "", fmt.Errorf("%w: segment longer than %d bytes", ErrBadPath, maxSegmentLen)
	case !utf8.ValidString(seg):
		return "", fmt.Errorf("%w: invalid UTF-8", ErrBadPath)
	case strings.ContainsAny(seg, `/\`):
		return "", fmt.Errorf("%w: encoded slash or backslash", ErrBadPath)
	case len(seg) == 2 && seg[1] == ':' && isLetter(seg[0]):
		return "", fmt.Errorf("%w: drive letter", ErrBadPath)
	}
	for _, c := range seg {
		if unicode.IsControl(c) {
			return "", fmt.Errorf("%w: control character", ErrBadPath)
		}
	}
	return seg, nil
}
