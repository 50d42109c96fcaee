package workload

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// LogStats is what ReadLog saw of a log.
type LogStats struct {
	// Lines is the number of lines read, Blank those with nothing on
	// them, Broken those it could not read (not fatal: each is counted
	// and skipped).
	Lines, Blank, Broken int
	// FirstBroken are the first MaxBrokenKept broken lines, with why.
	FirstBroken []BrokenLine
	// Unsorted is how many requests came before the one read before
	// them: the log was sorted by time when 0 (ReadLog sorts it).
	Unsorted int
}

// BrokenLine is one line ReadLog could not read.
type BrokenLine struct {
	Line   int // 1-based
	Reason string
}

func (b BrokenLine) String() string { return fmt.Sprintf("line %d: %s", b.Line, b.Reason) }

// MaxBrokenKept bounds LogStats.FirstBroken.
const MaxBrokenKept = 10

// maxLineBytes is the longest line ReadLog reads; a longer one is broken.
const maxLineBytes = 64 << 10

// ReadLog reads an access log in Common Log Format (host ident authuser
// [date] "request" status bytes) or Combined Log Format (the same and
// "referer" "user-agent", which are ignored), plain or gzip (told by its
// first bytes), and returns its requests in time order (a stable sort:
// requests of the same second keep the log's order). A line it can not
// read is counted in the stats, not fatal; the error is the reader's.
func ReadLog(r io.Reader) (*Workload, LogStats, error) {
	in, err := maybeGunzip(bufio.NewReaderSize(r, 64<<10))
	if err != nil {
		return nil, LogStats{}, err
	}
	p := &logReader{clients: newInterner(), objects: newInterner(), dates: map[string]int64{}}
	var st LogStats
	last := int64(math.MinInt64)
	err = eachLine(in, func(line []byte, long bool) {
		st.Lines++
		if len(bytes.TrimSpace(line)) == 0 && !long {
			st.Blank++
			return
		}
		rq, why := p.parse(line)
		if long {
			why = fmt.Sprintf("longer than %d bytes", maxLineBytes)
		}
		if why != "" {
			st.broke(st.Lines, why)
			return
		}
		if rq.At < last {
			st.Unsorted++
		}
		last = max(last, rq.At)
		p.reqs = append(p.reqs, rq)
	})
	if st.Unsorted > 0 {
		sortByTime(p.reqs)
	}
	return &Workload{Requests: p.reqs, Clients: p.clients.names, Objects: p.objects.names}, st, err
}

// broke counts line n as broken, and keeps it with why while fewer than
// MaxBrokenKept are kept.
func (st *LogStats) broke(n int, why string) {
	st.Broken++
	if len(st.FirstBroken) < MaxBrokenKept {
		st.FirstBroken = append(st.FirstBroken, BrokenLine{Line: n, Reason: why})
	}
}

// sortByTime sorts reqs by At, stably: requests of the same instant keep
// the order they were read in.
func sortByTime(reqs []Request) {
	slices.SortStableFunc(reqs, func(a, b Request) int { return cmp.Compare(a.At, b.At) })
}

// maybeGunzip returns the gzip stream's contents when br starts with
// gzip's magic, else br.
func maybeGunzip(br *bufio.Reader) (io.Reader, error) {
	magic, err := br.Peek(2)
	if err != nil || magic[0] != 0x1f || magic[1] != 0x8b {
		return br, nil // short or plain: read as it is
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("workload: gzip: %w", err)
	}
	return bufio.NewReaderSize(zr, 64<<10), nil
}

// eachLine calls f with each line of r without its newline; a line
// longer than maxLineBytes is given cut, with long set.
func eachLine(r io.Reader, f func(line []byte, long bool)) error {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if len(long) < maxLineBytes {
				long = append(long, chunk...)
			}
			continue
		case len(chunk) > 0 || long != nil:
			line := bytes.TrimRight(chunk, "\r\n")
			if long != nil {
				f(long[:min(len(long), maxLineBytes)], len(long)+len(line) > maxLineBytes)
				long = nil
			} else {
				f(line, len(line) > maxLineBytes)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("workload: read: %w", err)
		}
	}
}

// logReader parses lines into requests.
type logReader struct {
	clients, objects *interner
	dates            map[string]int64 // parsed dates, by their text: a log repeats each second
	reqs             []Request
}

// parse reads one line; why says what is wrong with a broken one.
func (p *logReader) parse(line []byte) (rq Request, why string) {
	host, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok || len(host) == 0 {
		return rq, "no client host"
	}
	// ident and authuser, then the date in brackets.
	open := bytes.IndexByte(rest, '[')
	end := bytes.IndexByte(rest, ']')
	if open < 0 || end < open {
		return rq, "no [date]"
	}
	at, err := p.date(rest[open+1 : end])
	if err != nil {
		return rq, "date: " + err.Error()
	}
	rest = bytes.TrimLeft(rest[end+1:], " ")
	request, rest, ok := quoted(rest)
	if !ok {
		return rq, `no "request"`
	}
	path, ok := requestPath(request)
	if !ok {
		return rq, "request without a path"
	}
	status, size, why := statusAndSize(rest)
	if why != "" {
		return rq, why
	}
	return Request{At: at, Client: p.clients.id(host), Object: p.objects.id(path), Size: size, Status: status}, ""
}

// date parses a log date, 01/Aug/1995:00:00:01 -0400.
func (p *logReader) date(b []byte) (int64, error) {
	if at, ok := p.dates[string(b)]; ok {
		return at, nil
	}
	t, err := time.Parse("02/Jan/2006:15:04:05 -0700", string(b))
	if err != nil {
		return 0, errors.New("want DD/Mon/YYYY:HH:MM:SS ±HHMM")
	}
	if len(p.dates) >= 1<<16 {
		clear(p.dates)
	}
	p.dates[string(b)] = t.UnixNano()
	return t.UnixNano(), nil
}

// quoted returns the text of the double-quoted string b starts with
// (backslash escapes kept as they are) and what follows it.
func quoted(b []byte) (text, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return b[1:i], b[i+1:], true
		}
	}
	return nil, nil, false
}

// requestPath returns the path (and query) of a request line, "GET
// /a?b HTTP/1.0", "GET /a" (HTTP/0.9) or one with an absolute URL.
func requestPath(request []byte) ([]byte, bool) {
	var f [4][]byte
	n := fields(request, f[:])
	if n < 2 || n > 3 {
		return nil, false
	}
	path := f[1]
	if i := bytes.Index(path, []byte("://")); i > 0 {
		path = path[i+3:]
		if j := bytes.IndexByte(path, '/'); j >= 0 {
			path = path[j:]
		} else {
			path = []byte("/")
		}
	}
	return path, len(path) > 0
}

// fields stores the first len(dst) space-separated fields of b in dst
// and returns how many fields b has (at most len(dst)).
func fields(b []byte, dst [][]byte) int {
	n := 0
	for len(b) > 0 && n < len(dst) {
		b = bytes.TrimLeft(b, " \t")
		if len(b) == 0 {
			break
		}
		end := bytes.IndexAny(b, " \t")
		if end < 0 {
			end = len(b)
		}
		dst[n], b = b[:end], b[end:]
		n++
	}
	return n
}

// statusAndSize reads " status bytes" and ignores what follows (the
// combined format's referer and user agent); bytes "-" is 0.
func statusAndSize(b []byte) (status uint16, size uint64, why string) {
	var f [2][]byte
	if fields(b, f[:]) < 2 {
		return 0, 0, "no status and size"
	}
	s, err := strconv.Atoi(string(f[0]))
	if err != nil || s < 100 || s > 999 {
		return 0, 0, fmt.Sprintf("status %q", f[0])
	}
	if string(f[1]) == "-" {
		return uint16(s), 0, ""
	}
	n, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Sprintf("size %q", f[1])
	}
	return uint16(s), n, ""
}
