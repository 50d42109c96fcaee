// Package workload holds the request streams the simulator replays: an
// access log read from Common or Combined Log Format, its requests in
// time order with the clients and objects they name interned, so that a
// day of a busy site fits in memory (32 bytes a request); and synthetic
// SURGE-style streams, made as they are read from a seed, whose memory is
// their objects' and clients' tables whatever their length.
package workload

import (
	"time"
)

// Request is one request of a workload.
type Request struct {
	// At is when it was made, in nanoseconds since the Unix epoch.
	At int64
	// Size is the response's body in bytes (0 for none or unknown).
	Size uint64
	// Client and Object index the workload's Clients and Objects.
	Client, Object uint32
	// Status is the response's status code.
	Status uint16
}

// Time returns At as a time.Time in UTC.
func (r Request) Time() time.Time { return time.Unix(0, r.At).UTC() }

// Workload is a stream of requests in time order and the names they
// index.
type Workload struct {
	Requests []Request
	// Clients are the client hosts (an address or a name, as the log
	// has it), Objects the paths requested (with their query).
	Clients, Objects []string
}

// interner gives each distinct string one index.
type interner struct {
	index map[string]uint32
	names []string
}

func newInterner() *interner { return &interner{index: make(map[string]uint32)} }

// id returns s's index, adding s when it is new. b is s's bytes, which
// are copied only then.
func (in *interner) id(b []byte) uint32 {
	if i, ok := in.index[string(b)]; ok {
		return i
	}
	s := string(b)
	i := uint32(len(in.names))
	in.index[s] = i
	in.names = append(in.names, s)
	return i
}
