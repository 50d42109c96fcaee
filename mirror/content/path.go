package content

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// MaxPathLen is the longest path, in bytes, that an index holds (PATH_MAX).
const MaxPathLen = 4096

// checkPath returns an error when p is not a path that an index may hold:
// non-empty, at most MaxPathLen bytes, valid UTF-8 without NUL, relative,
// slash-separated and clean (no empty, "." or ".." element, no leading or
// trailing slash). Such a path never names anything outside the root.
func checkPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case len(p) > MaxPathLen:
		return fmt.Errorf("path of %d bytes, more than %d", len(p), MaxPathLen)
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q: not valid UTF-8", p)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q: NUL byte", p)
	}
	for elem := range strings.SplitSeq(p, "/") {
		if elem == "" || elem == "." || elem == ".." {
			return fmt.Errorf("path %q: element %q", p, elem)
		}
	}
	return nil
}

// escapePath appends p to b with '%', ' ' and the ASCII control bytes
// written as %XX, so that a path is one field of a line.
func escapePath(b []byte, p string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '%' || c <= ' ' || c == 0x7f {
			b = append(b, '%', hex[c>>4], hex[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

// unescapePath reverses escapePath; it refuses a malformed escape and a
// byte that escapePath would have escaped.
func unescapePath(s []byte) (string, error) {
	if !strings.ContainsRune(string(s), '%') {
		for _, c := range s {
			if c <= ' ' || c == 0x7f {
				return "", fmt.Errorf("unescaped byte %#02x in path", c)
			}
		}
		return string(s), nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= ' ' || c == 0x7f:
			return "", fmt.Errorf("unescaped byte %#02x in path", c)
		case c != '%':
			out = append(out, c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape in path")
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("bad escape %q in path", s[i:i+3])
		}
		out = append(out, byte(hi<<4|lo))
		i += 2
	}
	return string(out), nil
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// RequestPath is the index path of p, a URL path that a client asks
// for: p must start with "/", hold no NUL and no ".." element, and name
// a file (not the root); it is cleaned of "." and empty elements and
// returned without its leading "/", as an Index holds it.
func RequestPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q: must start with /", p)
	}
	for elem := range strings.SplitSeq(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("path %q: element %q", p, elem)
		}
	}
	rel := strings.Trim(path.Clean(p), "/")
	if rel == "" {
		return "", fmt.Errorf("path %q: names no file", p)
	}
	if err := checkPath(rel); err != nil {
		return "", err
	}
	return rel, nil
}
