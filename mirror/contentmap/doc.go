// Package contentmap is the content map: for every member of every group
// whose index it can reach, a copy (a mirror/content Replica) of the
// member's index of its document root, kept current by polling the
// member's admin listener. dnsd keeps one of every group (groupctl where,
// the mirror lists); a mirror keeps one of its siblings (which of them
// hold the file a redirect would send them); a site front end one of its
// back ends (which of them hold the file a request asks for).
//
// A member's index URL is its probe URL (or admin URL) with the path /v1/load replaced
// by /v1/content/index (same scheme, host and port). A member without a
// probe URL (push-only) has no index here: its contents are unknown. Each
// member is polled every Interval plus a random jitter with ?since= its
// copy's version and If-None-Match of it, so a member that changed
// nothing answers 304 and one that changed sends only the change set; at
// most Concurrency fetches are in flight, at most one a member, and a
// slow member delays no other. A 404 means the member keeps
// no index (content.index off): it is asked again only after
// NotFoundBackoff. A 429 is asked again after its Retry-After. Any other
// failure, and an index that the Replica refuses (malformed, hostile,
// inconsistent), is counted by group and reason and changes nothing: the
// last good copy stays. A run-time member of a group without
// allow_private is fetched on public addresses only, as it is probed.
//
// The members follow the groups as the caller's Members function gives
// them (config and run-time members): a member that appears is fetched
// at once, one that leaves is forgotten with its copy.
//
// A request for a file that no copy holds may be a file that appeared
// since the last poll: Refresh fetches the group's members at once (each
// at most once per MinRefresh, joining a fetch in flight), so that the
// caller can look again before it answers 404.
package contentmap
