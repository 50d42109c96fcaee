// Package admin is dnsd's admin HTTP server: the membership API (the routes
// of probe/api, signed writes), reload, explain, /metrics, and the
// dashboard with its event log, answer flows and history. It talks to the
// member registry and the dispatcher through the small interfaces it
// declares.
package admin
