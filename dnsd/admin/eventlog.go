package admin

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
)

// DefaultEventLogSize is how many recent events an EventLog keeps unless
// told otherwise.
const DefaultEventLogSize = 500

// EventKind says what an Event is about; the values are stable, the
// dashboard styles events by them.
type EventKind string

// Event kinds.
const (
	// EventMemberState: the prober changed a member's state (From → To).
	EventMemberState EventKind = "member_state"
	// EventDrain and EventUndrain: an operator drained or undrained a member.
	EventDrain   EventKind = "drain"
	EventUndrain EventKind = "undrain"
	// EventMemberAdd and EventMemberRemove: GROUP-ADD and GROUP-EXIT.
	EventMemberAdd    EventKind = "member_add"
	EventMemberRemove EventKind = "member_remove"
	// EventReload: the configuration was reloaded; EventReloadFailed: a
	// reload was rejected and the old configuration keeps serving.
	EventReload       EventKind = "reload"
	EventReloadFailed EventKind = "reload_failed"
	// EventFailOpen: no member of a group is up, dnsd answers with all of
	// them; EventFailOpenOver: members are up again.
	EventFailOpen     EventKind = "fail_open"
	EventFailOpenOver EventKind = "fail_open_over"
	// EventLagging: a member's generation is more than its group's
	// max_lag behind the newest, it left the answers; EventCaughtUp: it
	// is back.
	EventLagging  EventKind = "lagging"
	EventCaughtUp EventKind = "caught_up"
	// EventStart: dnsd started.
	EventStart EventKind = "start"
)

// Event is one entry of the recent-events list of the dashboard. It holds
// no secret.
type Event struct {
	// Seq numbers the events of one EventLog from 1, in the order added.
	Seq uint64 `json:"seq"`
	// Time is when it happened.
	Time time.Time `json:"time"`
	// Kind says what happened.
	Kind EventKind `json:"kind"`
	// Group and Member name what it happened to, when it is about one.
	Group  string `json:"group,omitempty"`
	Member string `json:"member,omitempty"`
	// From and To are the states before and after a state change.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Message says why or what, for people.
	Message string `json:"message,omitempty"`
}

// EventLog keeps the most recent events in a bounded ring and tells
// waiters when one arrives. It is safe for concurrent use; Add never
// blocks on a reader.
type EventLog struct {
	now func() time.Time

	mu      sync.Mutex
	ring    []Event
	next    int // index of the next write
	full    bool
	seq     uint64
	changed chan struct{} // closed and replaced by every Add
}

// NewEventLog returns an empty EventLog that keeps the last size events
// (DefaultEventLogSize when size <= 0). now stamps events that come without
// a time; nil means time.Now.
func NewEventLog(size int, now func() time.Time) *EventLog {
	if size <= 0 {
		size = DefaultEventLogSize
	}
	if now == nil {
		now = time.Now
	}
	return &EventLog{now: now, ring: make([]Event, size), changed: make(chan struct{})}
}

// Add appends ev, stamping its Seq (and its Time when zero), and wakes the
// waiters of Changed.
func (l *EventLog) Add(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = l.now()
	}
	l.mu.Lock()
	l.seq++
	ev.Seq = l.seq
	l.ring[l.next] = ev
	l.next = (l.next + 1) % len(l.ring)
	l.full = l.full || l.next == 0
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// Snapshot returns the events kept, oldest first.
func (l *EventLog) Snapshot() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.full {
		return slices.Clone(l.ring[:l.next])
	}
	return append(slices.Clone(l.ring[l.next:]), l.ring[:l.next]...)
}

// Changed returns a channel that is closed by the next Add.
func (l *EventLog) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// ProbeEvent records a state change of the prober (probe.WatcherConfig's
// OnEvent): it never blocks.
func (l *EventLog) ProbeEvent(ev probe.Event) {
	l.Add(Event{
		Time: ev.Time, Kind: EventMemberState, Group: ev.Group, Member: ev.Member,
		From: ev.From.String(), To: ev.To.String(), Message: ev.Reason,
	})
}

// FailOpen records the start (on) or the end of a fail-open episode of
// group (DispatcherOptions.OnFailOpen).
func (l *EventLog) FailOpen(group string, on bool) {
	if on {
		l.Add(Event{Kind: EventFailOpen, Group: group, Message: "no member is up: answering with all members"})
		return
	}
	l.Add(Event{Kind: EventFailOpenOver, Group: group, Message: "members are up again"})
}

// Lagging records a member of group that started lagging (on) or caught
// up, with its lag (dispatch.Options.OnLagging).
func (l *EventLog) Lagging(group, member string, on bool, lag time.Duration) {
	if on {
		l.Add(Event{Kind: EventLagging, Group: group, Member: member, Message: fmt.Sprintf("%s behind the newest generation: out of the answers", lag.Round(time.Second))})
		return
	}
	l.Add(Event{Kind: EventCaughtUp, Group: group, Member: member, Message: fmt.Sprintf("%s behind the newest generation: back in the answers", lag.Round(time.Second))})
}

// ReloadFailedMessage is the message of an EventReloadFailed. The event
// log is served without authentication (the dashboard), so it never
// carries the reload's error, which quotes the configuration and zone
// files; the caller of the reload and the log get the error.
const ReloadFailedMessage = "reload failed; the old configuration keeps serving: see dnsd's log or POST /-/reload's reply"

// Reloader returns r with every reload recorded: EventReload on success,
// EventReloadFailed (ReloadFailedMessage, not the error) on failure. The
// error is returned as r returned it.
func (l *EventLog) Reloader(r Reloader) Reloader { return &eventReloader{r: r, log: l} }

type eventReloader struct {
	r   Reloader
	log *EventLog
}

func (e *eventReloader) Reload(ctx context.Context) error {
	err := e.r.Reload(ctx)
	if err != nil {
		e.log.Add(Event{Kind: EventReloadFailed, Message: ReloadFailedMessage})
	} else {
		e.log.Add(Event{Kind: EventReload, Message: "configuration reloaded"})
	}
	return err
}

// Membership returns m with every successful drain, undrain, add and
// remove recorded; everything else passes through.
func (l *EventLog) Membership(m Membership) Membership {
	return &eventMembership{Membership: m, log: l}
}

type eventMembership struct {
	Membership
	log *EventLog
}

func (e *eventMembership) Add(group string, info api.MemberInfo) (api.MemberInfo, error) {
	out, err := e.Membership.Add(group, info)
	if err == nil {
		e.log.Add(Event{Kind: EventMemberAdd, Group: dns.CanonicalName(group), Member: out.Name, Message: "member added at run time"})
	}
	return out, err
}

func (e *eventMembership) Remove(group, member string) error {
	err := e.Membership.Remove(group, member)
	if err == nil {
		e.log.Add(Event{Kind: EventMemberRemove, Group: dns.CanonicalName(group), Member: member, Message: "member removed"})
	}
	return err
}

func (e *eventMembership) Drain(group, member string, on bool) error {
	err := e.Membership.Drain(group, member, on)
	if err == nil {
		ev := Event{Kind: EventDrain, Group: dns.CanonicalName(group), Member: member, Message: "drained by an operator"}
		if !on {
			ev.Kind, ev.Message = EventUndrain, "undrained by an operator"
		}
		e.log.Add(ev)
	}
	return err
}

var (
	_ Reloader   = (*eventReloader)(nil)
	_ Membership = (*eventMembership)(nil)
)
