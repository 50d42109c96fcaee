package workload

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The binary format of the 1998 World Cup web site's access logs, the
// Internet Traffic Archive's WorldCup98 data set (M. Arlitt and T. Jin),
// as its tools (ita_public_tools, by Martin Arlitt for Hewlett-Packard)
// define it: a record is src/request.h's struct request, four uint32 and
// four uint8 fields without padding, stored big-endian (network order):
//
//	offset  0 timestamp  seconds since the Unix epoch, converted to GMT
//	offset  4 clientID   one per client address, the same over all days
//	offset  8 objectID   one per URL, the same over all days
//	offset 12 size       bytes of the response; NO_SIZE (0xffffffff) for none
//	offset 16 method     an index into the methods (definitions.h)
//	offset 17 status     bits 7-6 the request's HTTP version, bits 5-0 an
//	                     index into the status codes (definitions.h)
//	offset 18 type       an index into the file types (definitions.h)
//	offset 19 server     bits 7-5 the region, bits 4-0 the server in it
//
// recreate.c and checklog.c stop at a record whose status, method or
// type index is past its table (checklog also checks the region); the
// HTTP version's 2 bits always index its 4 names.
const (
	// wcRecordSize is the size of struct request.
	wcRecordSize = 20
	// wcNoSize is definitions.h's NO_SIZE, which recreate prints as "-".
	wcNoSize = 0xffffffff
	// wcMethods is definitions.h's NUM_OF_METHODS: GET, HEAD, POST, PUT,
	// DELETE, TRACE, OPTIONS, CONNECT and OTHER_METHODS (0 to 8).
	wcMethods = 9
	// wcFileTypes is definitions.h's NUM_OF_FILETYPES: HTML, IMAGE,
	// AUDIO, VIDEO, JAVA, FORMATTED, DYNAMIC, TEXT, COMPRESSED, PROGRAMS,
	// DIRECTORY, ICL and OTHER_TYPES (0 to 12).
	wcFileTypes = 13
)

// wcStatusCodes are the status codes by their index in a record's status
// byte: definitions.h's SC_100 (0) to SC_505 (36), as recreate.c's
// CodeNames spells them, and OTHER_CODES (37), any other code, which
// recreate prints as "-" and is 0 here.
var wcStatusCodes = [...]uint16{
	100, 101,
	200, 201, 202, 203, 204, 205, 206,
	300, 301, 302, 303, 304, 305,
	400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415,
	500, 501, 502, 503, 504, 505,
	0,
}

// ReadWorldCup reads an access log of the 1998 World Cup web site in the
// binary format of the Internet Traffic Archive's WorldCup98 data set (a
// file such as wc_day6_1.gz, or the day's files concatenated), gzip or
// plain (told by its first bytes, as ReadLog does: no record of the data
// set starts with gzip's magic, a 1986 timestamp), and returns its
// requests in time order (a stable sort; the data set is sorted).
//
// A request's client is its clientID in decimal, as the data set's
// recreate tool writes it in its Common Log Format; its object is
// "/o/" and the objectID (the data set's object_mappings.sort names the
// URLs). Both are interned by ID, with one string for all the names.
// The size NO_SIZE is 0, and the status OTHER_CODES ("-") is 0. The
// method, the HTTP version, the file type and the server are not kept.
//
// The stats count records as lines (Blank is 0, BrokenLine.Line is a
// record's 1-based number). A record is broken when its status, method
// or file type index is past its table, or when it is a truncated last
// record (the input's length is not a multiple of 20 bytes); each is
// counted and skipped, not fatal. The error is the reader's or gzip's.
func ReadWorldCup(r io.Reader) (*Workload, LogStats, error) {
	in, err := maybeGunzip(bufio.NewReaderSize(r, 64<<10))
	if err != nil {
		return nil, LogStats{}, err
	}
	p := &wcReader{clients: newIDInterner(), objects: newIDInterner(), last: math.MinInt64}
	err = p.readAll(in)
	if p.st.Unsorted > 0 {
		sortByTime(p.reqs)
	}
	w := &Workload{Requests: p.reqs, Clients: p.clients.names(""), Objects: p.objects.names("/o/")}
	return w, p.st, err
}

// wcReader turns records into requests.
type wcReader struct {
	clients, objects *idInterner
	reqs             []Request
	st               LogStats
	last             int64 // the latest At read
}

// readAll reads in's records to its end; a tail shorter than a record
// is broken.
func (p *wcReader) readAll(in io.Reader) error {
	buf := make([]byte, 4096*wcRecordSize)
	held := 0 // bytes of buf not yet read as records
	for {
		n, err := in.Read(buf[held:])
		held += n
		whole := held - held%wcRecordSize
		for off := 0; off < whole; off += wcRecordSize {
			p.record(buf[off : off+wcRecordSize])
		}
		held = copy(buf, buf[whole:held])
		switch {
		case errors.Is(err, io.EOF):
			if held > 0 {
				p.st.Lines++
				p.st.broke(p.st.Lines, fmt.Sprintf("truncated record: %d of %d bytes", held, wcRecordSize))
			}
			return nil
		case err != nil:
			return fmt.Errorf("workload: read: %w", err)
		}
	}
}

// record reads one record of wcRecordSize bytes.
func (p *wcReader) record(b []byte) {
	p.st.Lines++
	rq, why := p.decode(b)
	if why != "" {
		p.st.broke(p.st.Lines, why)
		return
	}
	if rq.At < p.last {
		p.st.Unsorted++
	}
	p.last = max(p.last, rq.At)
	p.reqs = append(p.reqs, rq)
}

// decode returns the request record b holds; why says what is wrong
// with a broken one, whose IDs are not interned.
func (p *wcReader) decode(b []byte) (rq Request, why string) {
	b = b[:wcRecordSize]
	method, status, typ := b[16], b[17]&0x3f, b[18] // status's bits 7-6 are the HTTP version
	switch {
	case int(status) >= len(wcStatusCodes):
		return rq, fmt.Sprintf("status index %d past the %d status codes", status, len(wcStatusCodes))
	case method >= wcMethods:
		return rq, fmt.Sprintf("method index %d past the %d methods", method, wcMethods)
	case typ >= wcFileTypes:
		return rq, fmt.Sprintf("file type index %d past the %d file types", typ, wcFileTypes)
	}
	size := uint64(binary.BigEndian.Uint32(b[12:]))
	if size == wcNoSize {
		size = 0
	}
	return Request{
		At:     int64(binary.BigEndian.Uint32(b[0:])) * 1e9,
		Client: p.clients.id(binary.BigEndian.Uint32(b[4:])),
		Object: p.objects.id(binary.BigEndian.Uint32(b[8:])),
		Size:   size,
		Status: wcStatusCodes[status],
	}, ""
}

// idInterner gives each distinct 32-bit ID one index, in the order the
// IDs first come: an ID below maxDenseID has a slot in a table as long
// as the largest of them (4 bytes a slot), another a map entry; neither
// grows with the requests.
type idInterner struct {
	dense []uint32          // index+1 by ID; 0: not seen
	index map[uint32]uint32 // the indexes of IDs of maxDenseID and above
	ids   []uint32          // by index
}

// maxDenseID bounds the IDs of idInterner's table, at 16 MiB of it.
const maxDenseID = 1 << 22

func newIDInterner() *idInterner { return &idInterner{index: make(map[uint32]uint32)} }

// id returns v's index, adding v when it is new.
func (in *idInterner) id(v uint32) uint32 {
	if v >= maxDenseID {
		i, ok := in.index[v]
		if !ok {
			i = uint32(len(in.ids))
			in.index[v] = i
			in.ids = append(in.ids, v)
		}
		return i
	}
	if int(v) >= len(in.dense) {
		in.dense = slices.Grow(in.dense, int(v)+1-len(in.dense))
		in.dense = in.dense[:cap(in.dense)]
	}
	if i := in.dense[v]; i != 0 {
		return i - 1
	}
	in.ids = append(in.ids, v)
	in.dense[v] = uint32(len(in.ids))
	return uint32(len(in.ids) - 1)
}

// names returns the IDs' names by index, prefix and the ID in decimal,
// all slices of one string.
func (in *idInterner) names(prefix string) []string {
	var sb strings.Builder
	sb.Grow(len(in.ids) * (len(prefix) + 7))
	ends := make([]int, len(in.ids))
	var digits [10]byte
	for i, v := range in.ids {
		sb.WriteString(prefix)
		sb.Write(strconv.AppendUint(digits[:0], uint64(v), 10))
		ends[i] = sb.Len()
	}
	all := sb.String()
	names := make([]string, len(in.ids))
	start := 0
	for i, end := range ends {
		names[i], start = all[start:end], end
	}
	return names
}
