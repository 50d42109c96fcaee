package main

import (
	"net/http"
	"time"

	"github.com/transmirror/transmirror/cmd/internal/daemon"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/mirror/frontend"
)

// siteContentInterval is how often a front end asks its back ends for
// the changes to their indexes (site.content): they are on its LAN, and
// a miss asks at once anyway.
const siteContentInterval = 5 * time.Second

// siteContentMap is the content map of a front end's back ends
// (site.content) and the loop that polls it; nil and no loop without
// site.content.
func siteContentMap(cfg *mirror.Config, d deps) (frontend.ContentMap, []daemon.Component, error) {
	if !cfg.Site.Content {
		return nil, nil, nil
	}
	members := frontend.ContentMembers(cfg.Backends)
	m, err := contentmap.New(contentmap.Options{
		Subsystem: "mirror",
		Client: &http.Client{
			Transport:     http.DefaultTransport.(*http.Transport).Clone(),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Members:  func() []contentmap.Member { return members },
		Registry: d.reg,
		Logger:   d.logger,
		Now:      d.clock,
		Interval: siteContentInterval,
	})
	if err != nil {
		return nil, nil, err
	}
	return m, []daemon.Component{m.Run}, nil
}
