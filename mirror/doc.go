// Package mirror is the mirror daemon, level 2 of transmirror's dispatch
// (correction): it serves a document root over HTTP (the back-end role,
// with a memory cache in front of the disk), reports its load to dnsd,
// corrects DNS dispatch with 302 redirects to siblings, or, as a pure
// dispatcher, redirects every request.
//
// The pieces are separable: Config (mirror.yaml, see LoadConfig; decoded
// and checked with zones/yamlconf, the config layer it shares with dnsd), a
// FileServer (an http.Handler over an os.Root, see NewFileServer) and a
// Server (timeouts, metrics and graceful shutdown around any handler, on
// a listener opened by the caller, see Server.Serve).
//
// Level 3, a site's front end over its back ends, is package
// mirror/frontend: its types are Config's backends and site sections,
// and a mirror with backends mounts the handler of frontend.New as its
// content (Options.Content), whose status it shows (SiteStatusSource).
package mirror
