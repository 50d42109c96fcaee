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
// The 302 correction (Decide, Redirector) picks a sibling with the group's
// own scheduler policy from a GroupSnapshot, the group view that a
// ViewWatcher refreshes from dnsd, and books every redirect on the
// sibling it goes to (GroupSnapshot.Book): in a scheduler.Estimator per
// view, the one dnsd books its answers in, one redirected request's load
// (10/W load units for a report window of W, see BookingFor), decaying,
// until the next view, whose loads include it. So the redirects between
// two views spread over the siblings by their room instead of all going
// to the least loaded one. A dispatcher books the same way on the members
// and counts its redirects by target member.
//
// Level 3, a site's front end over its back ends, is package
// mirror/frontend: its types are Config's backends and site sections,
// and a mirror with backends mounts the handler of frontend.New as its
// content (Options.Content), whose status it shows (SiteStatusSource).
package mirror
