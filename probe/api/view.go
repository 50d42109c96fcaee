package api

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/transmirror/transmirror/probe"
)

// MaxViewBytes is the largest GroupView body, in bytes, that a mirror
// reads (its ClientOptions.MaxResponse when it refreshes the view). dnsd
// bounds its groups (members, addresses, name lengths) so that the
// largest view it can make stays within half of it.
const MaxViewBytes = 4 << 20

// GroupView is GROUP-QUERY's answer, the JSON of dnsd's GetGroup: the
// group's settings and every member with its live state and its figures
// as measured (the last reported load and bytes per second, when they
// were reported, the hidden load of recent answers, the capacity and the
// bandwidth). It carries no secret. Mirrors
// refresh it to choose redirect targets with the same figures dnsd's
// policy uses; groupctl and the dashboard show it.
type GroupView struct {
	// Name is the group's canonical name ("www.example.org.").
	Name string `json:"name"`
	// Policy is the global answer policy.
	Policy string `json:"policy"`
	// TTL bounds the answer TTL, seconds.
	TTL TTLView `json:"ttl"`
	// Answers is how many members an answer carries.
	Answers int `json:"answers"`
	// Watermarks are the utilization thresholds of the policy.
	Watermarks Watermarks `json:"watermarks"`
	// FailOpen is true while no member is up and dnsd answers with all.
	FailOpen bool `json:"fail_open"`
	// MaxLag is the group's max_lag in seconds (absent: off); LagFailOpen
	// is true while every member that could be answered lags more and
	// dnsd answers with the freshest of them.
	MaxLag      float64 `json:"max_lag_seconds,omitempty"`
	LagFailOpen bool    `json:"lag_fail_open,omitempty"`
	// Time is when the view was made.
	Time time.Time `json:"time"`
	// Members are the members, config file ones first.
	Members []MemberView `json:"members"`
	// Top are the group's most requested paths: the sums of the members'
	// counts (probe.MergeTop) over their last reports that are at most
	// probe.DefaultReportMaxAge old, at most probe.MaxTopPaths, most
	// requested first; absent: none reported.
	Top []probe.PathCount `json:"top,omitempty"`
}

// TTLView is a group's TTL bounds.
type TTLView struct {
	Min uint32 `json:"min"`
	Max uint32 `json:"max"`
}

// Watermarks are utilization thresholds: a member's share shrinks above
// Low and it is skipped above High.
type Watermarks struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
}

// LocationView is where a member is.
type LocationView struct {
	Lat       *float64 `json:"lat,omitempty"`
	Lon       *float64 `json:"lon,omitempty"`
	Country   string   `json:"country,omitempty"`
	Continent string   `json:"continent,omitempty"`
}

// MemberInfo is a member as GROUP-ADD takes it (the body of AddMember)
// and as a view shows it. Capacity, in load units, and Bandwidth, in
// bytes per second (0 or absent: no limit), are the ones dnsd's policy
// divides by. Joined marks a member that sent its own GROUP-ADD (a
// mirror with join on) rather than one an operator added; it changes
// nothing in the answers.
type MemberInfo struct {
	Name      string       `json:"name"`
	Host      string       `json:"host"`
	Addresses []string     `json:"addresses"`
	Location  LocationView `json:"location"`
	Capacity  float64      `json:"capacity"`
	Bandwidth float64      `json:"bandwidth,omitempty"`
	Weight    float64      `json:"weight,omitempty"`
	Probe     string       `json:"probe,omitempty"`
	Joined    bool         `json:"joined,omitempty"`
}

// MemberView is one member in a GroupView.
type MemberView struct {
	MemberInfo
	// Source is "config" (the config file) or "runtime" (GROUP-ADD; a
	// member that added itself also has Joined).
	Source string `json:"source"`
	// State is unknown, up, down, draining or lagging (its generation is
	// more than the group's max_lag behind the newest: out of the
	// answers until a report shows it caught up).
	State string `json:"state"`
	// Since is when the member entered State (zero if never changed).
	Since time.Time `json:"since,omitzero"`
	// Load is the load of the member's last report, in load units, as the
	// member reported it (0 before the first); Reported is when that
	// report's figures were taken (zero: no report yet).
	Load     float64   `json:"load"`
	Reported time.Time `json:"reported,omitzero"`
	// BytesPerSecond is the response bytes per second of that report (0
	// before the first), what the member's Bandwidth is compared with.
	BytesPerSecond float64 `json:"bytes_per_second"`
	// Pending is dnsd's estimate, in load units, of the load that its
	// answers since that report will add and no report shows yet (the
	// hidden load of the least-load policies).
	Pending float64 `json:"pending"`
	// Utilization is the member's utilization as dnsd's policy sees it
	// (scheduler.Figures.Utilization): the larger of LoadUtilization,
	// (Load + Pending) / Capacity, and BandwidthUtilization,
	// BytesPerSecond / Bandwidth (0 without a bandwidth). They are for
	// people to read; programs use the figures.
	Utilization          float64 `json:"utilization"`
	LoadUtilization      float64 `json:"load_utilization"`
	BandwidthUtilization float64 `json:"bandwidth_utilization"`
	// LastReport is the last load report, pulled or pushed (nil if none),
	// without its top (the group's Top merges the members'); ReportAge is
	// its age in seconds when the view was made.
	LastReport *probe.Report `json:"last_report,omitempty"`
	ReportAge  float64       `json:"report_age_seconds,omitempty"`
	// AnswerShare is the member's share of the group's DNS answers over
	// the last minute; CapacityShare its share of the capacity of the
	// members that are answered.
	AnswerShare   float64 `json:"answer_share"`
	CapacityShare float64 `json:"capacity_share"`
	// Generation is the member's generation as its last report said (when
	// its last complete sync was taken from the master; absent: it does
	// not say), and Lag how far, in seconds, it is behind the group's
	// newest (absent with a generation: 0, the newest).
	Generation time.Time `json:"generation,omitzero"`
	Lag        float64   `json:"lag_seconds,omitempty"`
	// Rescued is the requests the member redirected to a sibling holding
	// the file instead of answering 404, since it started, as its last
	// report said (absent: none, or no report).
	Rescued uint64 `json:"rescued,omitempty"`
}

// Where is the JSON of GroupWhere: which members of a group hold a file,
// as dnsd's content map knows their indexes.
type Where struct {
	// Group is the group's canonical name; Path the file's URL path as
	// asked, cleaned.
	Group string `json:"group"`
	Path  string `json:"path"`
	// Time is when the answer was made.
	Time time.Time `json:"time"`
	// Holders are the members whose index holds the file, in the group
	// view's order.
	Holders []WhereMember `json:"holders"`
	// Lacking are the members whose index is known and lacks the file;
	// Unknown those whose index dnsd does not know (push-only, content
	// index off, not fetched yet).
	Lacking []string `json:"lacking"`
	Unknown []string `json:"unknown"`
}

// WhereMember is one member that holds a file.
type WhereMember struct {
	Name string `json:"name"`
	Host string `json:"host"`
	// Size, in bytes, and ModTime are its copy's.
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mtime"`
	// Best is true when its copy is the best one (the newest: see
	// mirror/content's BestCopy), the one a request should get.
	Best bool `json:"best"`
	// State, Generation and Lag are the member's in the group view.
	State      string    `json:"state"`
	Generation time.Time `json:"generation,omitzero"`
	Lag        float64   `json:"lag_seconds,omitempty"`
	// Schemes are those its last report says it serves (absent: http
	// only, see probe.Report.Serves); Country its location's.
	Schemes []string `json:"schemes,omitempty"`
	Country string   `json:"country,omitempty"`
}

// GroupSummary is one group in the list of ListGroups.
type GroupSummary struct {
	Name     string `json:"name"`
	Policy   string `json:"policy"`
	Members  int    `json:"members"`
	Up       int    `json:"up"`
	FailOpen bool   `json:"fail_open"`
}

// GroupList is the JSON of ListGroups.
type GroupList struct {
	Groups []GroupSummary `json:"groups"`
}

// MaxRedirectMembers bounds the members of one RedirectReport.
const MaxRedirectMembers = 1024

// RedirectReport is a dispatcher's report of the redirects it sends, the
// body of PushRedirects. dnsd books the change of each rate since the
// dispatcher's previous report on the member, as load that the member's
// own report does not show yet.
type RedirectReport struct {
	// Dispatcher names the dispatcher (its host name): dnsd keeps the
	// rates of each one apart.
	Dispatcher string `json:"dispatcher"`
	// Time is when the rates were taken.
	Time time.Time `json:"time"`
	// Members are the redirects per second sent to each member, by name,
	// exponentially weighted over the dispatcher's time constant; a
	// member left out is sent none.
	Members map[string]float64 `json:"members"`
}

// Validate reports whether r is well formed: a dispatcher name of 1..253
// bytes without control characters, a time, at most MaxRedirectMembers
// members with non-empty names and finite rates in [0, 1e9].
func (r RedirectReport) Validate() error {
	var errs []error
	if n := len(r.Dispatcher); n == 0 || n > 253 || strings.IndexFunc(r.Dispatcher, func(c rune) bool { return c < 0x20 || c == 0x7f }) >= 0 {
		errs = append(errs, fmt.Errorf("dispatcher: %q: want 1..253 bytes without control characters", r.Dispatcher))
	}
	if r.Time.IsZero() {
		errs = append(errs, errors.New("time: missing"))
	}
	if len(r.Members) > MaxRedirectMembers {
		errs = append(errs, fmt.Errorf("members: %d, want at most %d", len(r.Members), MaxRedirectMembers))
	}
	for name, v := range r.Members {
		switch {
		case name == "":
			errs = append(errs, errors.New("members: an empty member name"))
		case !(v >= 0 && v <= 1e9):
			errs = append(errs, fmt.Errorf("members.%s: %g: want a rate in [0, 1e9]", name, v))
		}
	}
	return errors.Join(errs...)
}
