package contentmap

import "github.com/transmirror/transmirror/mirror/content"

// Lookup is what the map knows of one path in one group.
type Lookup struct {
	// Copies are the members whose index holds the path, with their copy.
	Copies map[string]content.Copy
	// Indexed are the members whose index is known; one of them not in
	// Copies lacks the path. A member of the group in neither is unknown
	// (push-only, no index kept, or not fetched yet).
	Indexed map[string]bool
}

// Lookup returns what the members of group hold under p, an index path
// (content.RequestPath). The map's lock is held only to find the
// members' copies, each an immutable index, so lookups of many requests
// do not queue behind one another's.
func (m *Map) Lookup(group, p string) Lookup {
	out := Lookup{Copies: map[string]content.Copy{}, Indexed: map[string]bool{}}
	type copyOf struct {
		name string
		x    *content.Index
	}
	var known []copyOf
	m.mu.Lock()
	for k, mb := range m.members {
		if k.group == group && mb.known {
			known = append(known, copyOf{k.member, mb.replica.Index()})
		}
	}
	m.mu.Unlock()
	for _, c := range known {
		out.Indexed[c.name] = true
		if e, ok := c.x.Lookup(p); ok {
			out.Copies[c.name] = content.Copy{Size: e.Size, ModTime: e.ModTime()}
		}
	}
	return out
}
