package api

import (
	"net/url"
	"strings"
)

// Route is one endpoint of an admin server: "METHOD /path", the path in
// http.ServeMux pattern syntax with the wildcards {group} and {member}.
// The server registers Pattern; a client fills in Path.
type Route string

// Wildcards of the routes' paths, the names of http.Request.PathValue.
const (
	// GroupParam is a group's name.
	GroupParam = "group"
	// MemberParam is a member's name in its group.
	MemberParam = "member"
)

// Query parameters of ExplainGroup.
const (
	// ClientParam is the client's (or resolver's) IP address.
	ClientParam = "client"
	// ECSParam is an EDNS Client Subnet prefix.
	ECSParam = "ecs"
	// QtypeParam is A or AAAA.
	QtypeParam = "qtype"
)

// Query parameters of GroupWhere and GroupMirrorList.
const (
	// PathParam is the URL path of a file ("/dists/stable/InRelease").
	PathParam = "path"
	// FormatParam chooses GroupMirrorList's format: "metalink" or "text".
	FormatParam = "format"
)

// HealthyPath is the path of Healthy, for the places that need a constant
// (a site's default back-end health check).
const HealthyPath = "/-/healthy"

// Routes of dnsd's admin server.
const (
	// ListGroups is the list of groups (GroupList).
	ListGroups Route = "GET /v1/groups"
	// GetGroup is GROUP-QUERY, one group's view (GroupView).
	GetGroup Route = "GET /v1/groups/{group}"
	// ExplainGroup is why dnsd answers a group the way it does for one
	// client (Explanation); see ExplainQuery.
	ExplainGroup Route = "GET /v1/groups/{group}/explain"
	// GroupWhere is which members hold a file, from dnsd's content map
	// (?path=P): a Where.
	GroupWhere Route = "GET /v1/groups/{group}/where"
	// GroupMirrorList is the members that hold a file's best copy as a
	// mirror list (?path=P): Metalink for Accept: application/metalink4+xml
	// or ?format=metalink, else plain text; 404 when nobody holds it.
	GroupMirrorList Route = "GET /v1/groups/{group}/mirrorlist"
	// AddMember is GROUP-ADD (signed): a MemberInfo in, the member as
	// added out, 201.
	AddMember Route = "POST /v1/groups/{group}/members"
	// RemoveMember is GROUP-EXIT (signed): Removed.
	RemoveMember Route = "DELETE /v1/groups/{group}/members/{member}"
	// PushLoad is LOAD-INFORM (signed): a probe.Report in, Accepted, 202.
	PushLoad Route = "POST /v1/groups/{group}/members/{member}/load"
	// PushRedirects is a dispatcher's report of the redirects it sends
	// (signed): a RedirectReport in, Accepted, 202.
	PushRedirects Route = "POST /v1/groups/{group}/redirects"
	// DrainMember stops answering with a member and keeps probing it
	// (signed, or with the admin token): Drained.
	DrainMember Route = "POST /v1/groups/{group}/members/{member}/drain"
	// UndrainMember answers with a drained member again (signed, or with
	// the admin token): Drained.
	UndrainMember Route = "POST /v1/groups/{group}/members/{member}/undrain"
	// PublishChallenge asks dnsd to serve an ACME DNS-01 challenge for
	// the member (signed): an ACMEChallenge in, the ACMEChallenge as
	// published (with its expiry) out, 200; 403 for a name the member is
	// not entitled to, 429 beyond its limits.
	PublishChallenge Route = "PUT /v1/groups/{group}/members/{member}/acme"
	// RemoveChallenge stops serving one of the member's challenge values
	// (signed): an ACMEChallenge in, ACMERemoved out.
	RemoveChallenge Route = "DELETE /v1/groups/{group}/members/{member}/acme"
	// ListChallenges is the live ACME challenges (ACMEChallenges); like
	// ListGroups it is not signed: what it shows is public in the DNS.
	ListChallenges Route = "GET /v1/acme/challenges"
	// Dashboard is the dashboard's data as JSON.
	Dashboard Route = "GET /v1/dashboard"
	// Stream is the dashboard's live stream (Server-Sent Events).
	Stream Route = "GET /v1/stream"
	// Ready answers 200 once dnsd serves.
	Ready Route = "GET /-/ready"
	// Reload reloads the daemon's configuration (loopback callers only,
	// with RequestHeader or a JSON Content-Type: see ReloadHandler); a bad
	// configuration is refused with 400 and the error.
	Reload Route = "POST /-/reload"
)

// Routes of the mirror's admin server.
const (
	// LoadReport is the mirror's load report (LOAD-QUERY), a probe.Report.
	LoadReport Route = "GET /v1/load"
	// MirrorStatus is the mirror's status page as JSON.
	MirrorStatus Route = "GET /v1/status"
	// SiteReport is a back end's report to its site front end (in flight,
	// cache, completed requests after ?after=N), a frontend.BackendReport.
	SiteReport Route = "GET /v1/site"
	// ContentIndex is the mirror's index of its document root (with
	// content.index): ?since=V answers the changes since version V, or the
	// whole index when V is absent, too old or unknown (the content
	// package's wire format).
	ContentIndex Route = "GET /v1/content/index"
)

// Routes of both admin servers.
const (
	// Healthy answers 200 while the daemon runs.
	Healthy Route = "GET " + HealthyPath
	// Metrics is the Prometheus exposition.
	Metrics Route = "GET /metrics"
)

// Routes returns every route, dnsd's first.
func Routes() []Route {
	return []Route{
		ListGroups, GetGroup, ExplainGroup, GroupWhere, GroupMirrorList, AddMember, RemoveMember, PushLoad, PushRedirects,
		DrainMember, UndrainMember, PublishChallenge, RemoveChallenge, ListChallenges, Dashboard, Stream, Ready, Reload,
		LoadReport, MirrorStatus, SiteReport, ContentIndex, Healthy, Metrics,
	}
}

// Method returns the route's HTTP method.
func (r Route) Method() string {
	m, _, _ := strings.Cut(string(r), " ")
	return m
}

// Pattern returns the route as an http.ServeMux pattern.
func (r Route) Pattern() string { return string(r) }

// Path returns the route's path with its wildcards replaced, in order, by
// values, each escaped as one path segment. A wildcard without a value is
// left as it is.
func (r Route) Path(values ...string) string {
	_, p, _ := strings.Cut(string(r), " ")
	if !strings.Contains(p, "{") {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if len(values) == 0 {
			break
		}
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i], values = url.PathEscape(values[0]), values[1:]
		}
	}
	return strings.Join(segs, "/")
}
