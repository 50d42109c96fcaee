// Package mirror is the mirror daemon: it serves a document root over
// HTTP, and (in later pieces) reports its load, corrects DNS dispatch with
// 302 redirects to siblings, and fronts a site's back ends.
//
// The pieces are separable: Config (mirror.yaml, see LoadConfig; decoded
// and checked with zones/yamlconf, the config layer it shares with dnsd), a
// FileServer (an http.Handler over an os.Root, see NewFileServer) and a
// Server (timeouts, metrics and graceful shutdown around any handler, on
// a listener opened by the caller, see Server.Serve).
package mirror
