package h1

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors of a response head; each is wrapped with what was wrong.
var (
	// ErrHead is a response head that is not HTTP/1.x.
	ErrHead = errors.New("h1: bad response head")
	// ErrHeadTooLarge is a response head over MaxHeadBytes.
	ErrHeadTooLarge = errors.New("h1: response head too large")
)

// MaxHeadBytes bounds a response head: the status line and the fields.
const MaxHeadBytes = 64 << 10

// Field is one header field of a head, as it came: the name in the case
// it was sent, the value without the whitespace around it.
type Field struct {
	Name, Value string
}

// Response is a response head and how its body is framed.
type Response struct {
	Status int
	// Minor is the protocol's minor version: HTTP/1.Minor.
	Minor int
	// Fields are the header fields in order, those of the framing
	// (Transfer-Encoding, Content-Length) and the connection's
	// (Connection, Keep-Alive) among them.
	Fields []Field
	// ContentLength is the body's length, -1 when the framing does not
	// say (chunked, or until the connection closes).
	ContentLength int64
	// Chunked is a chunked body (Transfer-Encoding: chunked).
	Chunked bool
	// Close is set when the connection can not carry another request
	// after this response: Connection: close, HTTP/1.0 without
	// keep-alive, or a body delimited by the connection's end.
	Close bool
	// head is the head's text, which the fields point into; ends are
	// where its lines end (both reused).
	head []byte
	ends []int
}

// readHead reads a response head from br into r (its Fields and head
// reused), skipping interim (1xx) responses but 101.
func readHead(br *bufio.Reader, r *Response) error {
	for {
		if err := readOneHead(br, r); err != nil {
			return err
		}
		if r.Status >= 200 || r.Status == 101 {
			return nil
		}
	}
}

// readOneHead reads one head: the status line, the fields, the blank
// line.
func readOneHead(br *bufio.Reader, r *Response) error {
	r.head, r.ends = r.head[:0], r.ends[:0]
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("%w: a line over %d bytes", ErrHeadTooLarge, br.Size())
		}
		if err != nil {
			return err
		}
		line = trimEOL(line)
		if len(line) == 0 {
			if len(r.ends) == 0 {
				continue // RFC 9112 2.2: empty lines before the status line are ignored
			}
			break
		}
		if len(r.head)+len(line) > MaxHeadBytes {
			return fmt.Errorf("%w: over %d bytes", ErrHeadTooLarge, MaxHeadBytes)
		}
		r.head = append(r.head, line...)
		r.ends = append(r.ends, len(r.head))
	}
	return r.parse(string(r.head), r.ends)
}

// trimEOL removes the line's "\n" or "\r\n".
func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// parse fills r from the head's text: its lines end at ends.
func (r *Response) parse(text string, ends []int) error {
	if err := r.statusLine(text[:ends[0]]); err != nil {
		return err
	}
	r.Fields = r.Fields[:0]
	for i := 1; i < len(ends); i++ {
		f, err := field(text[ends[i-1]:ends[i]])
		if err != nil {
			return err
		}
		r.Fields = append(r.Fields, f)
	}
	return r.framing()
}

// statusLine parses "HTTP/1.x NNN reason".
func (r *Response) statusLine(line string) error {
	if len(line) < 12 || !strings.HasPrefix(line, "HTTP/1.") || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return fmt.Errorf("%w: status line %.40q", ErrHead, line)
	}
	minor := line[7]
	code, err := strconv.Atoi(line[9:12])
	if minor < '0' || minor > '9' || err != nil || code < 100 || code > 999 {
		return fmt.Errorf("%w: status line %.40q", ErrHead, line)
	}
	r.Minor, r.Status = int(minor-'0'), code
	return nil
}

// field parses "Name: value".
func field(line string) (Field, error) {
	i := strings.IndexByte(line, ':')
	if i <= 0 || !isToken(line[:i]) {
		// A name with whitespace before the colon, or a folded line
		// (obs-fold): RFC 9112 5.1 and 5.2 say reject.
		return Field{}, fmt.Errorf("%w: field %.40q", ErrHead, line)
	}
	v := strings.Trim(line[i+1:], " \t")
	if hasNULCRLF(v) {
		return Field{}, fmt.Errorf("%w: field %.40q", ErrHead, line)
	}
	return Field{Name: line[:i], Value: v}, nil
}

// hasNULCRLF reports whether s holds a NUL, CR or LF: one pass of
// plain compares, several times strings.ContainsAny's speed on a
// field's few bytes.
func hasNULCRLF(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= '\r' && (c == 0 || c == '\r' || c == '\n') {
			return true
		}
	}
	return false
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return s != ""
}

// framing sets ContentLength, Chunked and Close from the fields
// (RFC 9112 6.3 and 9.3).
func (r *Response) framing() error {
	r.ContentLength, r.Chunked, r.Close = -1, false, r.Minor == 0
	sawLength := false
	for _, f := range r.Fields {
		switch {
		case strings.EqualFold(f.Name, "Content-Length"):
			n, err := strconv.ParseInt(f.Value, 10, 64)
			if err != nil || n < 0 || f.Value[0] == '+' || (sawLength && n != r.ContentLength) {
				return fmt.Errorf("%w: Content-Length %q", ErrHead, f.Value)
			}
			r.ContentLength, sawLength = n, true
		case strings.EqualFold(f.Name, "Transfer-Encoding"):
			if !strings.EqualFold(f.Value, "chunked") || r.Chunked {
				return fmt.Errorf("%w: Transfer-Encoding %q (chunked alone is understood)", ErrHead, f.Value)
			}
			r.Chunked = true
		case strings.EqualFold(f.Name, "Connection"):
			r.connection(f.Value)
		}
	}
	if r.Chunked {
		// Transfer-Encoding overrides Content-Length; a sender of both
		// may be smuggling: the connection is not used again.
		r.Close = r.Close || sawLength
		r.ContentLength = -1
	}
	return nil
}

// connection applies a Connection field's options.
func (r *Response) connection(v string) {
	for opt := range strings.SplitSeq(v, ",") {
		switch opt = strings.TrimSpace(opt); {
		case strings.EqualFold(opt, "close"):
			r.Close = true
		case strings.EqualFold(opt, "keep-alive") && r.Minor == 0:
			r.Close = false
		}
	}
}

// HasBody reports whether the response has a body, as an answer to a
// HEAD request when head (RFC 9112 6.3: never after HEAD, 1xx, 204, 304).
func (r *Response) HasBody(head bool) bool {
	return !head && r.Status >= 200 && r.Status != 204 && r.Status != 304
}

// Connection lists the field names that the Connection fields name, in
// lower case: hop-by-hop fields for this connection alone (RFC 9110 7.6.1).
func (r *Response) Connection() []string { return r.AppendConnection(nil) }

// AppendConnection appends the options of the Connection fields to out,
// as Connection does, and returns it: with out on the caller's stack,
// no allocation for a few.
func (r *Response) AppendConnection(out []string) []string {
	for _, f := range r.Fields {
		if !strings.EqualFold(f.Name, "Connection") {
			continue
		}
		for v := f.Value; v != ""; {
			var opt string
			opt, v, _ = strings.Cut(v, ",")
			if opt = strings.TrimSpace(opt); opt != "" {
				out = append(out, strings.ToLower(opt))
			}
		}
	}
	return out
}
