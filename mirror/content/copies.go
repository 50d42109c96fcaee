package content

import "time"

// Copy is what one member holds under a path: its size and modification
// time, and its hash when the member's index has one.
type Copy struct {
	Size    int64
	ModTime time.Time
	Hash    string // "" when unknown
}

// Same reports whether c and o are the same file: the same hash when both
// have one, else the same size and modification time (to the second, as
// HTTP's Last-Modified and rsync's default check see it).
func (c Copy) Same(o Copy) bool {
	if c.Hash != "" && o.Hash != "" {
		return c.Hash == o.Hash
	}
	return c.Size == o.Size && c.ModTime.Unix() == o.ModTime.Unix()
}

// BestCopy is the copy a request for the path should get: the newest one
// by modification time among the members' (a mirror that has synced
// since holds the newer file; an older copy is stale bytes), the larger
// on a tie of seconds, the greater hash on a tie of both (so that the
// choice does not depend on the map's order). ok is false when no member holds the path.
func BestCopy(copies map[string]Copy) (best Copy, ok bool) {
	for _, c := range copies {
		switch {
		case !ok:
		case c.ModTime.Unix() > best.ModTime.Unix():
		case c.ModTime.Unix() == best.ModTime.Unix() && c.Size > best.Size:
		case c.ModTime.Unix() == best.ModTime.Unix() && c.Size == best.Size && c.Hash > best.Hash:
		default:
			continue
		}
		best, ok = c, true
	}
	return best, ok
}
