package frontend

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/scheduler/site"
)

// Back ends that hold different files (site.content).
//
// With site.content the front end keeps a content map of its back ends
// (Options.Content: a mirror/contentmap.Map over ContentMembers, which
// polls each back end's index on its admin_url) and gives a request only
// to the back ends that hold its file, in every mode and for every
// policy, through site.Request.Has. A back end holds the file of a
// request when its index is known and has the best copy of the path among
// the back ends' indexes (content.BestCopy; content.Copy.Same: a stale
// copy does not count), or when its index is not known (no index on it,
// or not fetched yet): a back end whose contents are unknown is taken to
// hold everything, as before indexes (fail open). When no back end's
// index holds the path, the map is refreshed at once (contentmap Refresh,
// waiting at most contentRefreshWait) and looked at again; when still no
// back end holds it, the request goes to the policy's usual pick, which
// answers 404 as it would without site.content
// (transmirror_mirror_site_content_misses_total). So does a request whose
// holders are all down (transmirror_mirror_site_content_holders_down_total),
// and one whose path names no file an index could hold: the root, a path
// ending in "/" (a listing), a path with a ".." element (result
// not_a_file of transmirror_mirror_site_content_lookups_total). A
// directory named without its final "/" is a miss: the back end the
// usual pick gives it redirects to the listing.
//
// In handoff mode the front end adds Connection: close to the request it
// hands off, so that the client's next request on a keep-alive
// connection comes back to the front end and goes to a back end that has
// its file, instead of staying on the back end that took the connection.

// ContentGroup is the group under which the front end's content map
// keeps its back ends (ContentMembers).
const ContentGroup = "site"

// contentRefreshWait bounds how long a request waits for the refresh of
// the back ends' indexes when no index holds its path.
const contentRefreshWait = 2 * time.Second

// Results of transmirror_mirror_site_content_lookups_total.
const (
	contentHeld     = "held"       // sent to the back ends that hold the file
	contentUnknown  = "unknown"    // no back end's index is known: any back end
	contentNotAFile = "not_a_file" // the root, a listing, a path no index holds: any back end
	contentMiss     = "miss"       // no back end holds it, after a refresh: the usual pick
)

var contentResults = []string{contentHeld, contentUnknown, contentNotAFile, contentMiss}

// ContentMap is what the front end needs of the content map of its back
// ends (a mirror/contentmap.Map over ContentMembers): what their indexes
// hold under an index path, and a fetch of them at once on a miss.
type ContentMap interface {
	Lookup(group, path string) contentmap.Lookup
	Refresh(ctx context.Context, group string)
}

var _ ContentMap = (*contentmap.Map)(nil)

// ContentMembers are the members of the content map of a front end over
// backends: one per back end, in ContentGroup, whose index is fetched on
// its admin_url (contentmap.IndexURL); a back end without admin_url has
// no index there.
func ContentMembers(backends []Backend) []contentmap.Member {
	ms := make([]contentmap.Member, len(backends))
	for i, b := range backends {
		ms[i] = contentmap.Member{Group: ContentGroup, Name: b.Name, Probe: b.AdminURL}
	}
	return ms
}

// contentMap is the content map New routes by: o.Content under
// site.content, nil without it.
func contentMap(sc Config, o Options) (ContentMap, error) {
	switch {
	case !sc.Content:
		return nil, nil
	case o.Content == nil:
		return nil, errors.New("frontend: site.content needs the back ends' content map (Options.Content)")
	}
	return o.Content, nil
}

// restrict sets req.Has for r from the content map: the back ends that
// hold r's file, nil when every back end may be sent it (site.content
// off, no index known, every back end holds it, nobody does); see the
// comment at the top of this file.
func (h *handler) restrict(r *http.Request, req *site.Request) {
	if h.contents == nil {
		return
	}
	p, err := content.RequestPath(r.URL.Path)
	if err != nil || strings.HasSuffix(r.URL.Path, "/") {
		h.m.contentLookups.WithLabelValues(contentNotAFile).Inc()
		return
	}
	l := h.contents.Lookup(ContentGroup, p)
	if len(l.Indexed) == 0 {
		h.m.contentLookups.WithLabelValues(contentUnknown).Inc()
		return
	}
	if len(l.Copies) == 0 {
		ctx, cancel := context.WithTimeout(r.Context(), contentRefreshWait)
		h.contents.Refresh(ctx, ContentGroup)
		cancel()
		l = h.contents.Lookup(ContentGroup, p)
	}
	has, n := holders(h.backends, l)
	switch {
	case n == 0:
		h.m.contentLookups.WithLabelValues(contentMiss).Inc()
		h.m.contentMisses.Inc()
	case n < len(has):
		req.Has = has
		fallthrough
	default:
		h.m.contentLookups.WithLabelValues(contentHeld).Inc()
	}
}

// holders is the site.Request.Has of a path from what the back ends'
// indexes hold of it (l), and how many back ends hold it: a back end
// whose index is not known holds everything; one whose index is known
// holds the path when its copy is the best of all the copies
// (content.BestCopy, content.Copy.Same).
func holders(bs []*backend, l contentmap.Lookup) (has []bool, n int) {
	best, found := content.BestCopy(l.Copies)
	has = make([]bool, len(bs))
	for i, b := range bs {
		c, ok := l.Copies[b.name]
		if !l.Indexed[b.name] || (ok && found && c.Same(best)) {
			has[i] = true
			n++
		}
	}
	return has, n
}
