// Package mirror is the mirror daemon's configuration and what it knows
// of itself while it runs: Config (mirror.yaml, see LoadConfig; decoded
// and checked with zones/yamlconf, the config layer it shares with dnsd),
// the reload of it (PrepareReload, RestartChanges), the admin handler and
// the status page, and Mirror, a running mirror as those see it: the
// config in force and the Parts that its status reads and a reload
// changes. It wires nothing: the daemon's composition, a member (a
// document root or a site front end) or a dispatcher, each a flat list
// of components, is in cmd/mirror, which builds the Parts and hands them
// to New. The components live in their own packages:
//
//   - mirror/serve: the public Server (timeouts, hygiene, send timeout,
//     metrics, drain) and the back end's FileServer with its memory Cache;
//   - mirror/group: level 2, the correction (flow meters, the group view,
//     the fair-share law and the redirect decision, pushes of load and
//     redirect reports, join and leave);
//   - mirror/frontend: level 3, a site's front end over its back ends.
//
// Level 3's types are Config's backends and site sections; a member with
// backends serves the handler of frontend.New, whose status the page
// shows (SiteStatusSource). While none of its back ends is up the front
// end is not serving (SiteServing): its /-/healthy and its load report
// (GET /v1/load) answer 503 and it pushes no load reports, so that dnsd's
// health checks take it out of the answers; when a back end comes back,
// so does it.
package mirror
