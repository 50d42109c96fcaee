package api

import "net/url"

// Explanation is why a group question gets the answer it gets: the JSON of
// dnsd's ExplainGroup, what `groupctl explain` prints.
type Explanation struct {
	Group        string            `json:"group"`
	Policy       string            `json:"policy"`
	Qtype        string            `json:"qtype"`
	Client       string            `json:"client"`
	ECS          string            `json:"ecs,omitempty"`
	ClientPrefix string            `json:"client_prefix"`
	Location     LocationView      `json:"location"`
	Source       string            `json:"source"`
	ECSUse       string            `json:"ecs_use"`
	Scope        int               `json:"scope"`
	TTL          uint32            `json:"ttl"`
	FailOpen     bool              `json:"fail_open"`
	Answer       []string          `json:"answer"`
	Addresses    []string          `json:"addresses"`
	Members      []ExplainedMember `json:"members"`
	Why          string            `json:"why"`
	Watermarks   Watermarks        `json:"watermarks"`
	// Redirects is whom a mirror's 302 may send this client to, by the
	// scheme of its request; absent when dnsd has no group view.
	Redirects *RedirectFilter `json:"redirects,omitempty"`
}

// RedirectFilter is the filter of a mirror's redirect (the 302 correction,
// a rescue, a dispatcher) for one client: a sibling must serve the
// request's scheme (its reports say so; an older mirror's: http alone) and
// have an address of the client's family (NeedOf), so that a redirect
// never downgrades https and never sends an IPv6-only client to an
// IPv4-only sibling. With none eligible, the mirror serves the request.
type RedirectFilter struct {
	Family string `json:"family"` // the client's: IPv4 or IPv6
	// HTTP and HTTPS are the members eligible for a request of that
	// scheme, in the view's order.
	HTTP  []string `json:"http"`
	HTTPS []string `json:"https"`
	// Excluded says, for each member left out of either list, why.
	Excluded []ExcludedMember `json:"excluded,omitempty"`
}

// ExcludedMember is a member a redirect of some scheme may not go to.
type ExcludedMember struct {
	Name   string   `json:"name"`
	From   []string `json:"from"` // the schemes of the requests it is excluded from
	Reason string   `json:"reason"`
}

// ExplainedMember is one member as the policy saw it.
type ExplainedMember struct {
	Name       string  `json:"name"`
	State      string  `json:"state"`
	DistanceKm float64 `json:"distance_km"`
	Load       float64 `json:"load"`
	Pending    float64 `json:"pending"`
	Capacity   float64 `json:"capacity"`
	// BytesPerSecond is the last report's and Bandwidth the member's (0:
	// no limit), in bytes per second.
	BytesPerSecond float64 `json:"bytes_per_second"`
	Bandwidth      float64 `json:"bandwidth,omitempty"`
	Weight         float64 `json:"weight"`
	// Utilization is the larger of (Load + Pending) / Capacity and
	// BytesPerSecond / Bandwidth, as the policy compares it with the
	// watermarks.
	Utilization float64 `json:"utilization"`
	Picked      bool    `json:"picked"`
	Note        string  `json:"note"`
	// Serves is what its redirected clients can reach it on (Offers):
	// http, https, IPv4, IPv6; absent when dnsd has no group view.
	Serves []string `json:"serves,omitempty"`
}

// ExplainQuery is the question of ExplainGroup, sent as its query
// parameters; dnsd validates them.
type ExplainQuery struct {
	// Client is the client's (or its resolver's) IP address.
	Client string
	// ECS is an EDNS Client Subnet prefix such as 198.51.100.0/24; ""
	// asks without one.
	ECS string
	// Qtype is A or AAAA; "" is A.
	Qtype string
}

// Values returns q as the query of an ExplainGroup request.
func (q ExplainQuery) Values() url.Values {
	v := url.Values{ClientParam: {q.Client}}
	if q.Qtype != "" {
		v.Set(QtypeParam, q.Qtype)
	}
	if q.ECS != "" {
		v.Set(ECSParam, q.ECS)
	}
	return v
}
