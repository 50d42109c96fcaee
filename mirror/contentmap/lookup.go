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
// (content.RequestPath).
func (m *Map) Lookup(group, p string) Lookup {
	out := Lookup{Copies: map[string]content.Copy{}, Indexed: map[string]bool{}}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, mb := range m.members {
		if k.group != group || !mb.known {
			continue
		}
		out.Indexed[k.member] = true
		if e, ok := mb.replica.Index().Lookup(p); ok {
			out.Copies[k.member] = content.Copy{Size: e.Size, ModTime: e.ModTime()}
		}
	}
	return out
}
