package globalsim

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/contentmap"
)

// Partial trees: a mirror whose Missing is above 0 lacks that share of
// the objects (each object by a hash of itself and the mirror), as a
// mirror that lags or holds part of the tree does. Its content answers
// 404 for them. With Config.ContentIndex its Redirector sees what it
// holds through Files and what its siblings hold through Contents, their
// content indexes, as a mirror's does, and rescues a request for a file
// it lacks to a sibling that holds it. dnsd, which answers names and not paths, can send a
// client to a mirror without the file: the result counts the requests
// that ended in a 404 all the same.

// holds reports whether mirror i holds object obj.
func (s *sim) holds(i int, obj uint64) bool {
	miss := s.c.Mirrors[i].Missing
	if miss <= 0 {
		return true
	}
	h := (obj+1)*0x9e3779b97f4a7c15 ^ uint64(i+1)*0xbf58476d1ce4e5b9
	h ^= h >> 31
	h *= 0x94d049bb133111eb
	h ^= h >> 29
	return float64(h>>11)/(1<<53) >= miss
}

// objectOf is the object a request path (or, without its slash, an index
// path) names: "/o/<n>".
func objectOf(p string) (uint64, bool) {
	n, ok := strings.CutPrefix(strings.TrimPrefix(p, "/"), "o/")
	if !ok {
		return 0, false
	}
	obj, err := strconv.ParseUint(n, 10, 64)
	return obj, err == nil
}

// modTime is every copy's: the objects do not change (and a copy's size
// is the size of the request being served, sim.size: every copy of an
// object is the same file).
func modTime() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// files is mirror i's own files (group.Files).
type files struct {
	s *sim
	i int
}

func (f files) Stat(escapedPath string) (int64, time.Time, bool) {
	obj, ok := objectOf(escapedPath)
	if !ok || !f.s.holds(f.i, obj) {
		return 0, time.Time{}, false
	}
	return int64(f.s.size), modTime(), true
}

// contents is mirror self's copy of its siblings' content indexes
// (group.ContentMap), always fresh.
type contents struct {
	s    *sim
	self int
}

func (c contents) Lookup(_, p string) contentmap.Lookup {
	lk := contentmap.Lookup{Copies: map[string]content.Copy{}, Indexed: map[string]bool{}}
	obj, ok := objectOf(p)
	for i, m := range c.s.mirrors {
		if i == c.self {
			continue
		}
		lk.Indexed[m.name] = true
		if ok && c.s.holds(i, obj) {
			lk.Copies[m.name] = content.Copy{Size: int64(c.s.size), ModTime: modTime()}
		}
	}
	return lk
}

func (contents) Refresh(context.Context, string) {}
