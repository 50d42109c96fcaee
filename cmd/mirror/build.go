package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/cmd/internal/daemon"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/acmeclient"
	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/probe"
)

// wired is a mirror wired for its role: what serve runs, and the Mirror
// that the status page and the reload read.
type wired struct {
	*mirror.Mirror
	reporter *probe.Reporter
	view     *group.ViewWatcher // nil without dnsd (the Mirror's, for the tests)
	joiner   *group.Joiner      // nil without join
	loops    []daemon.Component // the group view, the push and the ACME renewal, beside the listeners
	handler  http.Handler       // the public chain, without the server's request metrics
	public   *serve.Server
	admin    http.Handler
	index    http.Handler // the content index's admin API; nil without content.index
	release  func() error // releases the content, once nothing serves
	tls      *certs.Set   // the public HTTPS listeners' certificates; nil without tls.listen
	// tlsALPN01 answers TLS-ALPN-01 on the HTTPS listeners (nil but
	// with tls.acme.challenge tls-alpn-01).
	tlsALPN01 *acmeclient.TLSALPN01
	// proxyProtocol wraps each public listener (proxy_protocol).
	proxyProtocol func(net.Listener) net.Listener
}

// build wires a mirror for the config's role: a dispatcher, or a member
// around its content (a site front end with backends, else the document
// root). Once nothing serves, release what it returns.
func build(cfg *mirror.Config, d deps) (*wired, error) {
	d = d.withDefaults()
	proxied, err := proxyProtocol(cfg, d)
	if err != nil {
		return nil, err
	}
	w, err := buildRole(cfg, d)
	if err != nil {
		return nil, err
	}
	w.proxyProtocol = proxied
	w.tlsALPN01 = d.tlsALPN01
	if d.acme != nil {
		w.loops = append(w.loops, d.acme.Run)
	}
	return w, nil
}

// buildRole wires the mirror of the config's role (see build).
func buildRole(cfg *mirror.Config, d deps) (*wired, error) {
	if cfg.Dispatcher {
		return buildDispatcher(cfg, d)
	}
	newContent := rootContent
	if len(cfg.Backends) > 0 {
		newContent = newSite
	}
	c, err := newContent(cfg, d)
	if err != nil {
		return nil, err
	}
	w, err := buildMember(cfg, d, c)
	if err != nil {
		c.release()
		return nil, err
	}
	return w, nil
}

// role describes what the mirror serves, for -check and the log.
func role(cfg *mirror.Config) string {
	switch {
	case cfg.Dispatcher:
		return "dispatcher"
	case len(cfg.Backends) > 0:
		return fmt.Sprintf("front end of %d back ends", len(cfg.Backends))
	}
	return "serving " + cfg.Root
}

// buildMember wires a member around c: the load meters, the group view,
// the push of its load, the join, the redirect decision in front of c,
// the rescans of its content index (with content.index), then the public
// server and the admin handler.
func buildMember(cfg *mirror.Config, d deps, c content) (*wired, error) {
	d = d.withDefaults()
	flows := group.NewFlowMeter(cfg.Redirect.TimeConstant.D())
	generation, err := generationOf(cfg, d, c.index)
	if err != nil {
		return nil, err
	}
	reporter, meter, err := loadMeters(cfg, d, flows, generation)
	if err != nil {
		return nil, err
	}
	booking := group.MirrorBooking(d.reportWindow, flows.TimeConstant())
	view, err := newView(cfg, d, cfg.Member, booking)
	if err != nil {
		return nil, err
	}
	pusher, err := memberPusher(cfg, d, reporter.Snapshot, c.serving)
	if err != nil {
		return nil, err
	}
	joiner, err := newJoiner(cfg, d, view)
	if err != nil {
		return nil, err
	}
	siblings, err := newSiblings(d, view, cfg.Group, cfg.Member)
	if err != nil {
		return nil, err
	}
	redirect, err := newRedirector(cfg, d, c.handler, meter, flows, view, c.files, siblings)
	if err != nil {
		return nil, err
	}
	m := mirror.New(cfg, mirror.Parts{
		Reporter: reporter, Meter: meter, Redirector: redirect, View: view, Joiner: joiner,
		Files: c.files, Site: c.site, Serving: c.serving, Started: d.clock(), Certificates: certStatus(d.tls),
	})
	w := &wired{Mirror: m, reporter: reporter, view: view, joiner: joiner, loops: loops(view, pusher, siblings),
		index: c.indexAPI, release: c.release, tls: d.tls}
	w.loops = append(w.loops, c.loops...)
	if c.index != nil {
		w.loops = append(w.loops, c.index.Run)
	}
	if err := w.front(cfg, d, redirect, c.serving, siteReport(m, c.completions, d.clock)); err != nil {
		return nil, err
	}
	return w, nil
}

// buildDispatcher wires a dispatcher: the load meters, the group view
// (every member a candidate), the push of the redirects it sends and the
// redirect decision in front of nothing, then the public server and the
// admin handler.
func buildDispatcher(cfg *mirror.Config, d deps) (*wired, error) {
	d = d.withDefaults()
	flows := group.NewFlowMeter(cfg.Redirect.TimeConstant.D())
	reporter, meter, err := loadMeters(cfg, d, flows, nil)
	if err != nil {
		return nil, err
	}
	booking := group.MirrorBooking(d.reportWindow, flows.TimeConstant())
	view, err := newView(cfg, d, "", booking)
	if err != nil {
		return nil, err
	}
	pusher, err := dispatcherPusher(cfg, d, booking)
	if err != nil {
		return nil, err
	}
	members, err := newSiblings(d, view, cfg.Group, "")
	if err != nil {
		return nil, err
	}
	redirect, err := newRedirector(cfg, d, nil, meter, flows, view, nil, members)
	if err != nil {
		return nil, err
	}
	m := mirror.New(cfg, mirror.Parts{Reporter: reporter, Meter: meter, Redirector: redirect, View: view, Started: d.clock(), Certificates: certStatus(d.tls)})
	w := &wired{Mirror: m, reporter: reporter, view: view, loops: loops(view, pusher, members), release: func() error { return nil }, tls: d.tls}
	if err := w.front(cfg, d, redirect, nil, nil); err != nil {
		return nil, err
	}
	return w, nil
}

// front builds what both roles serve around the redirect decision: the
// public chain (the HTTP-01 answers with d.http01, the health path, the
// load Reporter, the most-requested counter, the Redirector) and its
// Server, the status page and the admin
// handler (with siteReport, when set, a back end's report to its front
// end, and w.index, when set, the content index).
func (w *wired) front(cfg *mirror.Config, d deps, redirect http.Handler, serving func() bool, siteReport http.Handler) error {
	counted, err := w.countPaths(cfg, d, redirect)
	if err != nil {
		return err
	}
	w.handler = mirror.WithHealth(serving, w.reporter.Wrap(counted))
	if d.http01 != nil {
		w.handler = d.http01.Wrap(w.handler) // the CA's requests before anything counts or redirects them
	}
	so := mirror.ServerOptionsFromConfig(cfg, w.handler)
	so.Logger, so.Registerer = d.logger, d.reg
	if w.public, err = serve.NewServer(so); err != nil {
		return err
	}
	status, err := mirror.NewStatusHandler(w.Mirror, d.clock)
	if err != nil {
		return err
	}
	w.admin = http.MaxBytesHandler(mirror.NewAdminHandler(mirror.AdminOptions{
		Reporter: w.reporter, Gatherer: d.reg, Logger: d.logger, Status: status, SiteReport: siteReport, Serving: serving,
		ContentIndex: w.index,
	}), serve.DefaultMaxBodyBytes)
	return nil
}

// loops are the Components of the group view, of the push and of the
// siblings' content map, those that are configured.
func loops(view *group.ViewWatcher, pusher *group.Pusher, siblings *contentmap.Map) []daemon.Component {
	var cs []daemon.Component
	if view != nil {
		cs = append(cs, view.Run)
	}
	if pusher != nil {
		cs = append(cs, pusher.Run)
	}
	if siblings != nil {
		cs = append(cs, siblings.Run)
	}
	return cs
}

// httpsConfig is the TLS config of every public HTTPS listener (one for
// all, so that a session resumes on any): w.tls's certificates by SNI,
// TLS-ALPN-01's on acme-tls/1 with w.tlsALPN01; nil without tls.listen.
func (w *wired) httpsConfig() *tls.Config {
	if w.tls == nil {
		return nil
	}
	c := w.tls.ServerConfig()
	if w.tlsALPN01 != nil {
		c = w.tlsALPN01.ServerConfig(c)
	}
	return c
}
