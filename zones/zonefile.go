package zones

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// DefaultZoneTTL is the TTL of records that state none when the zone file
// has no $TTL directive and no earlier record gave one.
const DefaultZoneTTL = 3600

// ParseZone reads the RFC 1035 zone file for origin from r with miekg's
// ZoneParser ($ORIGIN, $TTL, relative names; $INCLUDE only when
// allowInclude) and validates it: exactly one SOA, at the apex; NS records
// at the apex; every owner inside origin; no CNAME beside other data; glue
// for in-bailiwick name servers; no DNAME. file names the zone in errors
// and is the base of relative $INCLUDE paths. All problems are returned
// joined, each as "FILE:LINE: what".
//
// An $INCLUDE may name only a file in the zone file's directory or below
// it (no "..", no absolute path elsewhere, no symbolic link out of it:
// ErrIncludeOutside), and an error in an included file says FILE:LINE
// and the kind of error but never the text there: the error reaches the
// reload's reply and the log, and an include of the wrong file (say
// /etc/shadow) must not print it.
func ParseZone(origin, file string, r io.Reader, allowInclude bool) (*Zone, error) {
	if _, ok := dns.IsDomainName(origin); !ok || origin == "" {
		return nil, fmt.Errorf("%s: invalid zone origin %q", file, origin)
	}
	origin = dns.CanonicalName(origin)
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	src := newLineReader(data)
	// The parser opens includes through an fs.FS rooted at the zone
	// file's directory; it joins each relative include path to the
	// directory of the file it is in, so it is given absolute names.
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	zp := dns.NewZoneParser(src, origin, abs)
	zp.SetIncludeAllowed(allowInclude)
	if allowInclude {
		root, err := os.OpenRoot(filepath.Dir(abs))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		defer root.Close()
		zp.SetIncludeFS(includeFS{root: root, prefix: strings.TrimLeft(filepath.ToSlash(filepath.Dir(abs)), "/") + "/"})
	}
	zp.SetDefaultTTL(DefaultZoneTTL)

	var (
		rrs   []dns.RR
		lines = make(map[dns.RR]int)
		prev  = 0 // offset where the previous record ended
		line  = 1
	)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		line = src.recordLine(prev, src.off, line)
		prev = src.off
		rrs = append(rrs, rr)
		lines[rr] = line
	}
	if err := zp.Err(); err != nil {
		return nil, zoneParseError(file, abs, err)
	}

	c := &zoneCheck{file: file, origin: origin, lines: lines, included: src.includeLines()}
	z := c.check(rrs)
	if err := c.err(); err != nil {
		return nil, err
	}
	z.File = file
	z.lines = lines
	return z, nil
}

// lineReader is the io.ByteReader that the ZoneParser reads from (so it
// adds no buffer of its own): its offset after each record tells which
// lines of the file the record came from.
type lineReader struct {
	data   []byte
	off    int
	starts []int // offset of the first byte of each line
}

func newLineReader(data []byte) *lineReader {
	starts := []int{0}
	for i, b := range data {
		if b == '\n' && i+1 < len(data) {
			starts = append(starts, i+1)
		}
	}
	return &lineReader{data: data, starts: starts}
}

func (r *lineReader) ReadByte() (byte, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	b := r.data[r.off]
	r.off++
	return b, nil
}

func (r *lineReader) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

// recordLine returns the line (1-based) where the record read from the
// bytes [from, to) starts: the first line there that is not blank, a
// comment or a directive. Records that come from $INCLUDE or $GENERATE get
// the line of that directive; when nothing was read at all (the second
// and later records of such a directive) the record keeps line prev.
func (r *lineReader) recordLine(from, to, prev int) int {
	dir := 0
	for i := sort.SearchInts(r.starts, from); i < len(r.starts) && r.starts[i] < to; i++ {
		end := len(r.data)
		if i+1 < len(r.starts) {
			end = r.starts[i+1]
		}
		text := bytes.TrimSpace(r.data[r.starts[i]:end])
		switch {
		case len(text) == 0 || text[0] == ';':
			continue
		case text[0] == '$':
			dir = i + 1
			continue
		}
		return i + 1
	}
	if dir != 0 {
		return dir
	}
	return prev
}

// ErrIncludeOutside is the error of an $INCLUDE of a file outside the
// zone file's directory.
var ErrIncludeOutside = errors.New("zones: $INCLUDE outside the zone file's directory")

// includeFS opens the zone parser's includes inside root, the zone file's
// directory; prefix is that directory as the parser names it (slashes,
// no leading one).
type includeFS struct {
	root   *os.Root
	prefix string
}

func (f includeFS) Open(name string) (fs.File, error) {
	rel, ok := strings.CutPrefix(name, f.prefix)
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrIncludeOutside}
	}
	file, err := f.root.Open(rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// os.Root refuses a symbolic link out of it (its error is not
		// exported): the link itself, or a directory on the way.
		if fi, lerr := f.root.Lstat(rel); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 || strings.Contains(err.Error(), "escapes") {
			return nil, &fs.PathError{Op: "open", Path: name, Err: ErrIncludeOutside}
		}
	}
	return file, err
}

// zoneParseError turns a *dns.ParseError, whose text is
// "FILE: dns: WHAT: "TOKEN" at line: L:C", into "FILE:L: WHAT: "TOKEN"";
// abs is the absolute name the parser knows file by. An error in an
// included file keeps its name and line and drops the token: the text of
// a file that the zone file includes is never quoted.
func zoneParseError(file, abs string, err error) error {
	var pe *dns.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", file, err)
	}
	s := pe.Error()
	included := false
	if i := strings.Index(s, "dns: "); i >= 0 {
		if f := strings.TrimSuffix(s[:i], ": "); f != "" && f != abs {
			file, included = f, true // the error is in an $INCLUDEd file
		}
		s = s[i+len("dns: "):]
	}
	line := 0
	if i := strings.LastIndex(s, " at line: "); i >= 0 {
		pos := s[i+len(" at line: "):]
		if j := strings.IndexByte(pos, ':'); j >= 0 {
			pos = pos[:j]
		}
		line, _ = strconv.Atoi(pos)
		s = s[:i]
	}
	if included && !filepath.IsAbs(file) {
		file = "/" + file
	}
	if errors.Is(err, ErrIncludeOutside) {
		return fmt.Errorf("%s:%d: %w %s", file, line, ErrIncludeOutside, filepath.Dir(abs))
	}
	if included {
		// The token is the last `: "…"` (strconv.QuoteToASCII escapes
		// any quote inside it).
		if i := strings.LastIndex(s, `: "`); i >= 0 {
			s = s[:i]
		}
	}
	s = strings.TrimSuffix(s, `: ""`) // no token to show
	if line > 0 {
		return fmt.Errorf("%s:%d: %s", file, line, s)
	}
	return fmt.Errorf("%s: %s", file, s)
}

// includeLines returns the lines that hold an $INCLUDE directive: the
// records of the included file are named by that line.
func (r *lineReader) includeLines() map[int]bool {
	lines := make(map[int]bool)
	for i, start := range r.starts {
		end := len(r.data)
		if i+1 < len(r.starts) {
			end = r.starts[i+1]
		}
		text := bytes.TrimSpace(r.data[start:end])
		if len(text) >= len("$INCLUDE") && strings.EqualFold(string(text[:len("$INCLUDE")]), "$INCLUDE") {
			lines[i+1] = true
		}
	}
	return lines
}

// zoneCheck collects the validation errors of one zone file.
type zoneCheck struct {
	file     string
	origin   string
	lines    map[dns.RR]int
	included map[int]bool // lines of $INCLUDE directives
	errs     []lineError
}

type lineError struct {
	line int
	msg  string
}

// errorf records an error at line. An error about a record of an
// included file (named by its $INCLUDE line) says what is wrong without
// the names and data it was written with (every string but the origin
// reads "…"): the text of an included file is never quoted.
func (c *zoneCheck) errorf(line int, format string, args ...any) {
	if c.included[line] {
		args = slices.Clone(args)
		for i, a := range args {
			if s, ok := a.(string); ok && s != c.origin {
				args[i] = "…"
			}
		}
		format = "a record of the included file: " + format
	}
	c.errs = append(c.errs, lineError{line, fmt.Sprintf(format, args...)})
}

func (c *zoneCheck) err() error {
	slices.SortStableFunc(c.errs, func(a, b lineError) int { return cmp.Compare(a.line, b.line) })
	errs := make([]error, len(c.errs))
	for i, e := range c.errs {
		errs[i] = fmt.Errorf("%s:%d: %s", c.file, e.line, e.msg)
	}
	return errors.Join(errs...)
}

// check validates rrs and returns them indexed as a Zone (which is only
// meaningful when no error was recorded).
func (c *zoneCheck) check(rrs []dns.RR) *Zone {
	var (
		kept     []dns.RR
		soa      dns.RR
		firstRR  = 1
		hasFirst bool
	)
	for _, rr := range rrs {
		h := rr.Header()
		line := c.lines[rr]
		if !hasFirst {
			firstRR, hasFirst = line, true
		}
		name := dns.CanonicalName(h.Name)
		if !dns.IsSubDomain(c.origin, name) {
			c.errorf(line, "owner %q is outside the zone %q", name, c.origin)
			continue
		}
		if h.Class != dns.ClassINET {
			c.errorf(line, "%s %s: class %s is not supported, only IN", name, dns.TypeToString[h.Rrtype], dns.Class(h.Class))
			continue
		}
		switch h.Rrtype {
		case dns.TypeSOA:
			if name != c.origin {
				c.errorf(line, "SOA record at %q, not at the apex %q", name, c.origin)
				continue
			}
			if soa != nil {
				c.errorf(line, "second SOA record at the apex (the first is at line %d)", c.lines[soa])
				continue
			}
			soa = rr
		case dns.TypeDNAME:
			c.errorf(line, "DNAME at %q: DNAME is not supported", name)
			continue
		}
		kept = append(kept, rr)
	}
	if soa == nil {
		c.errorf(firstRR, "zone %q has no SOA record at the apex", c.origin)
	}
	z := NewZone(c.origin, kept)
	if len(z.RRset(c.origin, dns.TypeNS)) == 0 {
		line := firstRR
		if soa != nil {
			line = c.lines[soa]
		}
		c.errorf(line, "zone %q has no NS records at the apex", c.origin)
	}
	for _, n := range z.nodes {
		c.checkCNAME(n)
		for _, rr := range n.RRsets[dns.TypeNS] {
			c.checkGlue(z, n.Name, rr.(*dns.NS))
		}
	}
	return z
}

// checkCNAME reports a CNAME that shares its name with other data, or a
// second CNAME (RFC 1034 §3.6.2, RFC 2181 §10.1). DNSSEC records may sit
// beside a CNAME (RFC 4035 §2.5).
func (c *zoneCheck) checkCNAME(n *Node) {
	cnames := n.RRsets[dns.TypeCNAME]
	if len(cnames) == 0 {
		return
	}
	first := cnames[0]
	for _, rr := range cnames[1:] {
		if c.lines[rr] < c.lines[first] {
			first = rr
		}
	}
	for _, rr := range cnames {
		if rr != first {
			c.errorf(c.lines[rr], "second CNAME at %q (the first is at line %d)", n.Name, c.lines[first])
		}
	}
	var other dns.RR
	for t, set := range n.RRsets {
		switch t {
		case dns.TypeCNAME, dns.TypeRRSIG, dns.TypeNSEC:
			continue
		}
		for _, rr := range set {
			if other == nil || c.lines[rr] < c.lines[other] {
				other = rr
			}
		}
	}
	if other != nil {
		c.errorf(c.lines[first], "CNAME at %q beside other data (%s at line %d)",
			n.Name, dns.TypeToString[other.Header().Rrtype], c.lines[other])
	}
}

// checkGlue reports an NS record whose target is in bailiwick (inside the
// zone and not below another delegation) but has no address record.
func (c *zoneCheck) checkGlue(z *Zone, owner string, ns *dns.NS) {
	target := dns.CanonicalName(ns.Ns)
	if !dns.IsSubDomain(c.origin, target) {
		return
	}
	if cut := z.Cut(target); cut != "" && cut != z.Cut(owner) {
		return // under a sibling delegation: that one's glue, not ours
	}
	if len(z.RRset(target, dns.TypeA)) > 0 || len(z.RRset(target, dns.TypeAAAA)) > 0 {
		return
	}
	c.errorf(c.lines[ns], "NS %q -> %q: in-bailiwick name server has no glue A or AAAA record", owner, target)
}
