package serve

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

// NormalizePath validates the escaped path of a request and returns it
// normalized as nginx and Apache do before they map it to a file: empty
// segments are merged ("//" is "/"), "." segments are removed and a ".."
// segment removes the segment before it (RFC 3986 5.2.4 dot-segment
// removal), so that a flat apt repository's "/debian/./Release" is
// "/debian/Release". It refuses with ErrBadPath, rather than repairs:
//
//   - a path not starting with "/", longer than 4096 bytes or with a
//     segment longer than 255 bytes;
//   - a ".." that would leave the root ("/..", "/a/../.."), where RFC 3986
//     would stop at the root but a client that sends it is either broken
//     or hostile;
//   - dot segments that are encoded (%2e, %2e%2e, .%2e): only the
//     literal "." and ".." are dot segments, and an encoded one is a trick;
//   - encoded slashes and backslashes (%2F, %5C), raw backslashes, NUL and
//     other control characters, invalid escapes and invalid or overlong
//     UTF-8 (%c0%ae) after decoding, Windows drives ("C:") in any segment,
//     also in one that a ".." removes.
//
// The result is still escaped as it came (segments are not re-encoded)
// and keeps a trailing slash, also when the last segment was "." or "..".
func NormalizePath(escaped string) (string, error) {
	if len(escaped) > maxPathLen {
		return "", fmt.Errorf("%w: longer than %d bytes", ErrBadPath, maxPathLen)
	}
	rest, ok := strings.CutPrefix(escaped, "/")
	if !ok {
		return "", fmt.Errorf("%w: does not start with /", ErrBadPath)
	}
	if rest == "" {
		return "/", nil
	}
	var buf [32]string
	segs, isDir, changed := buf[:0], false, false
	for r := range strings.SplitSeq(rest, "/") {
		if isDir {
			changed = true // an empty or dot segment that is not the last
		}
		isDir = false
		switch r {
		case "", ".":
			isDir, changed = true, changed || r == "."
			continue
		case "..":
			if len(segs) == 0 {
				return "", fmt.Errorf("%w: .. leaves the root", ErrBadPath)
			}
			segs = segs[:len(segs)-1]
			isDir, changed = true, true
			continue
		}
		if _, err := cleanSegment(r); err != nil {
			return "", err
		}
		segs = append(segs, r)
	}
	switch {
	case len(segs) == 0:
		return "/", nil
	case !changed:
		return escaped, nil // already normal: no copy
	}
	norm := "/" + strings.Join(segs, "/")
	if isDir {
		norm += "/"
	}
	return norm, nil
}

// CleanPath validates the escaped path of a request (r.URL.EscapedPath())
// and returns the slash-separated name it denotes relative to the document
// root, without leading or trailing slash ("." for the root itself), and
// whether it ended in "/". The path is first normalized by NormalizePath
// (empty and "." segments dropped, ".." inside the root applied), with its
// errors; CleanPath never returns a name that could leave the root.
// Besides what NormalizePath refuses, a name that the OS could not use as
// a local name (filepath.Localize) is refused with ErrBadPath. Segments
// of the normalized path starting with "." (dot-files such as .git or
// .htaccess, and "..;") are refused with ErrHiddenPath, except a first
// segment ".well-known" (RFC 8615). Percent-decoding is done once:
// "%252e" is the literal name "%2e".
func CleanPath(escaped string) (name string, isDir bool, err error) {
	norm, err := NormalizePath(escaped)
	if err != nil {
		return "", false, err
	}
	rest := norm[1:]
	if rest == "" {
		return ".", true, nil
	}
	if rest, isDir = strings.CutSuffix(rest, "/"); isDir && rest == "" {
		return ".", true, nil
	}
	raw := strings.Split(rest, "/")
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

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
