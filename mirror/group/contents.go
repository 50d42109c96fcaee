package group

import (
	"context"
	"net/http"
	"time"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/contentmap"
)

// MissRefresh bounds how long a request for a file that no copy holds
// waits for the siblings' indexes to be fetched again (ContentMap.Refresh)
// before it is answered without them.
const MissRefresh = 2 * time.Second

// ContentMap is what the siblings' content indexes say
// (mirror/contentmap's Map is one).
type ContentMap interface {
	// Lookup is what the members of group hold under p, an index path.
	Lookup(group, p string) contentmap.Lookup
	// Refresh fetches the indexes of group's members again now, at most
	// once a member per contentmap.Options.MinRefresh.
	Refresh(ctx context.Context, group string)
}

// holdingsFunc is RedirectRequest.Holdings of r, nil without Contents.
func (rd *Redirector) holdingsFunc(r *http.Request, rules *RedirectRules) func() (Holdings, bool) {
	if rd.o.Contents == nil {
		return nil
	}
	return func() (Holdings, bool) { return rd.holdings(r, rules) }
}

// holdings is which members hold r's path, and whether this mirror holds
// its best copy: from the siblings' indexes (fetched again first when
// neither this mirror nor any copy holds it: a file may have appeared
// since) and this mirror's own file (a stat, never its index, which may
// lag the disk). Without Files a front end counts as holding every file
// and a dispatcher none; without an index of any sibling nothing is
// known.
func (rd *Redirector) holdings(r *http.Request, rules *RedirectRules) (Holdings, bool) {
	p, err := content.RequestPath(r.URL.Path)
	if err != nil {
		return Holdings{}, true
	}
	own, mine := rd.ownCopy(r)
	mine = mine && !rules.Dispatcher // which holds nothing
	lk := rd.o.Contents.Lookup(rules.Group, p)
	if len(lk.Copies) == 0 && !mine && len(lk.Indexed) > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), MissRefresh)
		rd.o.Contents.Refresh(ctx, rules.Group)
		cancel()
		lk = rd.o.Contents.Lookup(rules.Group, p)
	}
	if len(lk.Indexed) == 0 {
		return Holdings{}, true
	}
	copies := lk.Copies
	if mine && rd.o.Files != nil {
		copies[selfKey] = own
	}
	h := NewHoldings(copies, AnyCopyPath(rules.InPlace, r.URL.Path)).Unknown(lk.Indexed)
	return h, rd.o.Files == nil || (mine && h.Holds(selfKey))
}

// selfKey is this mirror in a Holdings' copies: no member's name is empty.
const selfKey = ""

// ownCopy is this mirror's copy of r's file; true without Files (a front
// end, whose back ends hold the files).
func (rd *Redirector) ownCopy(r *http.Request) (content.Copy, bool) {
	if rd.o.Files == nil {
		return content.Copy{}, true
	}
	size, mt, ok := rd.o.Files.Stat(r.URL.EscapedPath())
	return content.Copy{Size: size, ModTime: mt}, ok
}
