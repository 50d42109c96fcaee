// Package serve is how a mirror answers HTTP at its public edge: the
// Server (timeouts, request hygiene, the send timeout between writes,
// request metrics and a graceful drain, around any handler, on listeners
// opened by the caller, see Server.Serve) and the back end's file serving,
// a FileServer over an os.Root (clean paths, no dotfiles, no link out of
// the root, byte ranges merged and bounded, optional listings) with a
// memory Cache in front of the disk.
//
// It knows nothing of groups, load reports or redirects: the member, the
// dispatcher and a site's front end all serve through a Server, and only a
// member with a document root mounts a FileServer. Its defaults are the
// mirror config's (timeouts, limits, max_ranges).
package serve
