package group

import (
	"path"
	"strings"

	"github.com/transmirror/transmirror/mirror/content"
)

// Holdings answers, for one request path, which members may be sent the
// request: those that hold the best copy (content.BestCopy;
// content.Copy.Same), or, for a path that changes in place by design
// (AnyCopyPath), those that hold any copy. Known false means the members'
// contents are not known at all (no index of them): every member may be
// sent it, as before indexes. With Unknown, a member whose index is not
// known (it keeps none, or it was not fetched yet) may be sent it too:
// fail open, as before indexes, rather than lose the member.
type Holdings struct {
	Known   bool
	copies  map[string]content.Copy
	indexed map[string]bool // nil: every member is indexed
	best    content.Copy
	found   bool
	any     bool
}

// NewHoldings is the Holdings of a path from the members' copies of it
// (member → copy; a member absent from the map lacks the file). anyCopy
// says the path is one that any copy serves (AnyCopyPath).
func NewHoldings(copies map[string]content.Copy, anyCopy bool) Holdings {
	best, found := content.BestCopy(copies)
	return Holdings{Known: true, copies: copies, best: best, found: found, any: anyCopy}
}

// Unknown returns h where the members not in indexed (those whose index
// is known) count as holding every file.
func (h Holdings) Unknown(indexed map[string]bool) Holdings {
	h.indexed = indexed
	return h
}

// Best is the path's best copy; false when nothing is known or no member
// holds it.
func (h Holdings) Best() (content.Copy, bool) { return h.best, h.found }

// Holds reports whether member may be sent the request.
func (h Holdings) Holds(member string) bool {
	if !h.Known || (h.indexed != nil && member != selfKey && !h.indexed[member]) {
		return true
	}
	c, ok := h.copies[member]
	return ok && (h.any || c.Same(h.best))
}

// AnyCopyPath reports whether p (a request path) matches one of patterns:
// paths whose files change in place by design, such as a distribution's
// dists/*/InRelease or a repodata/ directory, which any fresh member
// serves whatever its copy's time. A pattern that ends in "/" is a prefix
// of the path below the root (repodata/ matches /repodata/repomd.xml and
// /fedora/repodata/ does not: patterns are anchored at the root); any
// other is a path.Match pattern of the whole path below the root, where *
// stays within one segment (dists/*/InRelease).
func AnyCopyPath(patterns []string, p string) bool {
	rel := strings.TrimPrefix(p, "/")
	for _, pat := range patterns {
		if strings.HasSuffix(pat, "/") {
			if strings.HasPrefix(rel, pat) {
				return true
			}
			continue
		}
		if ok, err := path.Match(pat, rel); err == nil && ok {
			return true
		}
	}
	return false
}
