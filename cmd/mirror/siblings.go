package main

import (
	"net/http"
	"time"

	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/mirror/group"
)

// siblingInterval is how often a mirror asks each sibling for the changes
// of its index: five view intervals at the default, cheap (a 304 when
// nothing changed), and a request that no copy holds asks at once
// (contentmap.Map.Refresh).
const siblingInterval = 10 * time.Second

// newSiblings is the content map of the members of the group other than
// self, as the group view lists them, through d's client of dnsd (its CA
// is the group's); nil without a view.
func newSiblings(d deps, view *group.ViewWatcher, group, self string) (*contentmap.Map, error) {
	if view == nil {
		return nil, nil
	}
	client := d.client
	if client == nil {
		client = &http.Client{}
	}
	return contentmap.New(contentmap.Options{
		Subsystem: "mirror", Client: client, Registry: d.reg, Logger: d.logger, Now: d.clock, Interval: siblingInterval,
		Members: func() []contentmap.Member { return siblingsOf(view.Snapshot(), group, self) },
	})
}

// siblingsOf are the members of snap's view other than self with a probe
// URL (none without a view).
func siblingsOf(snap *group.GroupSnapshot, name, self string) []contentmap.Member {
	if snap == nil {
		return nil
	}
	var out []contentmap.Member
	for _, m := range snap.View.Members {
		if m.Name != self && m.Probe != "" {
			out = append(out, contentmap.Member{Group: name, Name: m.Name, Probe: m.Probe})
		}
	}
	return out
}
