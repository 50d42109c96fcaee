package main

import (
	"io"
	"net/http"

	"github.com/transmirror/transmirror/cmd/internal/daemon"
	"github.com/transmirror/transmirror/mirror"
	contentindex "github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/serve"
)

// content is what a member serves, with what the status page and the
// health endpoints read of it.
type content struct {
	handler     http.Handler
	files       *serve.FileServer       // a document root; nil for a site front end
	completions *frontend.Completions   // a document root's, for its front end
	site        mirror.SiteStatusSource // a site front end; nil for a document root
	serving     func() bool             // nil: always serving
	release     func() error
	index       *contentindex.Scanner // with content.index; nil otherwise
	indexAPI    http.Handler          // its admin API; nil without it
	loops       []daemon.Component    // run beside the listeners (site.content's map)
}

// rootContent opens the document root: a memory cache in front of the
// disk, so that a locality-aware front end makes the site's caches add
// up, with what it serves reported to its front end, and with
// content.index the root's index.
func rootContent(cfg *mirror.Config, d deps) (content, error) {
	cache, err := serve.NewCache(cfg.Site.Cache, serve.CacheOptions{Registerer: d.reg})
	if err != nil {
		return content{}, err
	}
	fo := serve.FileServerOptions{Listing: cfg.Listing, Logger: d.logger, Cache: cache, MaxRanges: maxRanges(cfg.MaxRanges)}
	files, err := serve.NewFileServer(cfg.Root, fo)
	if err != nil {
		return content{}, err
	}
	completions := frontend.NewCompletions()
	c := content{handler: completions.Wrap(files), files: files, completions: completions, release: files.Close}
	if cfg.Content.Index {
		if err := c.newIndex(cfg, d); err != nil {
			files.Close()
			return content{}, err
		}
	}
	return c, nil
}

// newIndex builds the content index of the document root and its admin
// API (content.index).
func (c *content) newIndex(cfg *mirror.Config, d deps) error {
	m, err := contentindex.NewMetrics(d.reg)
	if err != nil {
		return err
	}
	c.index = contentindex.NewScanner(cfg.Root, contentindex.ScanOptions{Clock: d.clock, Logger: d.logger, Metrics: m})
	c.indexAPI = contentindex.NewHandler(c.index, contentindex.HandlerOptions{
		Limit: contentindex.LimitOptions{Clock: d.clock}, Metrics: m,
	})
	return nil
}

// newSite builds the site front end over the config's back ends, with
// site.content the content map of their indexes that it routes by.
func newSite(cfg *mirror.Config, d deps) (content, error) {
	contents, loops, err := siteContentMap(cfg, d)
	if err != nil {
		return content{}, err
	}
	h, closer, err := frontend.New(cfg.Site, cfg.Backends, frontend.Options{Logger: d.logger, Registerer: d.reg, Content: contents})
	if err != nil {
		return content{}, err
	}
	c := siteContent(h, closer)
	c.loops = loops
	return c, nil
}

// siteContent is the content of a site front end h (from frontend.New),
// which shows its status and says whether it can serve.
func siteContent(h http.Handler, closer io.Closer) content {
	c := content{handler: h, release: closer.Close}
	c.site, _ = h.(mirror.SiteStatusSource)
	if s, ok := h.(mirror.SiteServing); ok {
		c.serving = s.Serving
	}
	return c
}

// maxRanges is FileServerOptions.MaxRanges for the max_ranges key, whose
// 0 turns ranges off.
func maxRanges(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
