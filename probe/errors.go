package probe

import "errors"

// Sentinel errors; the errors returned by this package wrap one of them.
var (
	// ErrReportTooLarge is returned for a report body longer than the limit.
	ErrReportTooLarge = errors.New("probe: report too large")
	// ErrNotPublic is why a probe of a PublicOnly member did not connect:
	// the address its host name resolved to is not globally reachable.
	ErrNotPublic = errors.New("probe: not a public address")
	// ErrReportSyntax is returned for a report that is not one JSON object
	// of the report's fields, each once, with no trailing data.
	ErrReportSyntax = errors.New("probe: malformed report")
	// ErrInvalidReport is returned for a report whose values break the rules
	// of Report.Validate.
	ErrInvalidReport = errors.New("probe: invalid report")
	// ErrReportFuture is returned for a pushed report whose time is
	// further ahead of the Watcher's clock than HealthConfig.ReportMaxSkew.
	ErrReportFuture = errors.New("probe: report from the future")
	// ErrReportStale is returned for a pushed report whose time is further
	// behind the Watcher's clock than HealthConfig.ReportMaxAge.
	ErrReportStale = errors.New("probe: stale report")
	// ErrReportOutOfOrder is returned for a pushed report that is not
	// newer than the member's newest report: a replay or a reordering.
	ErrReportOutOfOrder = errors.New("probe: report out of order")
	// ErrAbsurdLoad is returned for a report whose load is more than
	// MaxLoadRatio times the member's capacity.
	ErrAbsurdLoad = errors.New("probe: absurd load")

	// ErrProbe is wrapped by every failed probe's Result.Err.
	ErrProbe = errors.New("probe: probe failed")

	// ErrMemberExists is returned by Watcher.Add for a member already watched.
	ErrMemberExists = errors.New("probe: member already exists")
	// ErrUnknownMember is returned for a group and member not watched.
	ErrUnknownMember = errors.New("probe: unknown member")
	// ErrInvalidSpec is returned for a MemberSpec or config that breaks the rules.
	ErrInvalidSpec = errors.New("probe: invalid member spec")
	// ErrRunning is returned by Watcher.Run when it is already running.
	ErrRunning = errors.New("probe: watcher already running")
)
