// Package frontend is level 3 of transmirror's dispatch, the local one: a
// site's front end over its back ends. For each request a site policy of
// scheduler/site picks a back end among those that are not down (active
// health checks with rise/fall hysteresis, plus passive counting of
// failed requests), and the request is handed over by the configured
// mode: proxied (httputil.ReverseProxy, with one retry of an idempotent
// request on another back end), redirected (302 to the back end's public
// URL) or handed off (the client's TCP connection passed to a back-end
// process over a Unix socket, see ListenHandoff). In every mode the
// policy is told when a request starts and ends, so that its signals (in
// flight, sizes, locality) stay true. With site.content the back ends hold
// different files, and a request goes only to those whose content index
// (a ContentMap, kept by the caller) holds its file (see content.go).
//
// The pieces: Config and Backend (the site and backends sections of
// mirror.yaml, defaulted and validated by Config.Check with the shared
// error collector of zones/yamlconf), New (the front end, an http.Handler
// with its Closer), Status (what the mirror's status page shows of it)
// and ListenHandoff (the back end's side of connection handoff). The
// mirror daemon (package mirror) mounts the front end as its content;
// this package does not import it.
package frontend
