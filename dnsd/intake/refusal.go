package intake

import (
	"errors"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

// Reasons a load report is refused, the reason label of
// transmirror_dnsd_reports_refused_total.
const (
	RefusedUnauthenticated = "unauthenticated" // no secret, a bad or replayed signature
	RefusedFuture          = "future"          // report or signature ahead of dnsd's clock
	RefusedStale           = "stale"           // report or signature too old
	RefusedOutOfOrder      = "out_of_order"    // not newer than the member's newest report
	RefusedAbsurdLoad      = "absurd_load"     // load above 1000× the capacity
	RefusedInvalid         = "invalid"         // malformed, too large, a bad figure, another member's
	RefusedUnknownGroup    = "unknown_group"
	RefusedUnknownMember   = "unknown_member"
)

// Reasons are the values of the reason label.
var Reasons = [...]string{
	RefusedUnauthenticated, RefusedFuture, RefusedStale, RefusedOutOfOrder,
	RefusedAbsurdLoad, RefusedInvalid, RefusedUnknownGroup, RefusedUnknownMember,
}

// refusal is the reason err refuses a report, "" when it is not a refusal
// (nil, or a fault of dnsd).
func refusal(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, probe.ErrReportFuture):
		return RefusedFuture
	case errors.Is(err, probe.ErrReportStale):
		return RefusedStale
	case errors.Is(err, probe.ErrReportOutOfOrder):
		return RefusedOutOfOrder
	case errors.Is(err, probe.ErrAbsurdLoad):
		return RefusedAbsurdLoad
	case errors.Is(err, zones.ErrUnknownGroup):
		return RefusedUnknownGroup
	case errors.Is(err, probe.ErrUnknownMember):
		return RefusedUnknownMember
	case errors.Is(err, probe.ErrInvalidReport), errors.Is(err, probe.ErrReportSyntax),
		errors.Is(err, probe.ErrReportTooLarge):
		return RefusedInvalid
	}
	return ""
}
