// Package probe is transmirror's load reporting and health checking: the one
// load report type (JSON, the same for pull and push), the mirror-side
// Reporter that measures it, the pull prober ProbeLoad, the Health state
// machine with rise/fall hysteresis, and the dnsd-side Watcher that
// schedules probes, takes pushed reports and keeps every member's state;
// and a mirror's generation, the time of its last complete sync: the first
// line of a trace file (ParseTrace, read by Trace for the mirror's reports,
// fetched by MasterWatcher for dnsd's masters), carried in the report.
// The admin API that carries reports and views between the daemons, with
// its request signing, is package api.
//
// Choices where the design leaves room:
//
//   - The report's run-queue figure m is the host's 1-minute load average
//     (first field of /proc/loadavg), not the instantaneous running count of
//     the fourth field: the running count includes the reader itself and
//     jumps between 0 and the core count from one read to the next, while
//     the load average is the smoothed run-queue length the server-group
//     formula load = 10·(r + m) was meant for. ParseLoadavg returns both.
//     A Reporter with RunQueueInFlight takes m from its own requests in
//     flight instead, for a process whose host's load is not its own.
//   - Conns in a report is the number of requests in flight in the wrapped
//     handler (what a connection-counting policy balances), not the number
//     of open TCP connections, which idle keep-alives would inflate.
//   - Redirects are responses with status 302 Found, the status the mirror's
//     load correction uses.
//   - Requests, bytes and redirects are counted when a request completes,
//     over a sliding window (default 10 s) of ten buckets; a rate is the
//     count in the window divided by the time the window really covers.
//   - Health flips up after Rise (default 2) consecutive successes and down
//     after Fall (default 3) consecutive failures; a new member starts
//     unknown. A member that flipped between up and down FlapLimit (default
//     4) times within FlapWindow (default 5 min) is flapping and needs
//     2×Rise successes to come back up; going down is never delayed.
//   - A pushed report counts as a successful probe. A member that pushed
//     within the staleness window (2× its interval) is not polled; polling
//     resumes when its pushes go stale. A member without a probe URL is
//     push-only: unknown until its first push, then each interval without
//     a fresh push counts as a failure with reason "stale". Push takes a
//     report already decoded and valid (dnsd's intake checks it once).
//   - A report is believed only within limits: a pushed one whose time is
//     more than ReportMaxSkew (default 30 s) ahead of dnsd's clock or more
//     than ReportMaxAge (default 60 s) behind it, whose load is more than
//     MaxLoadRatio (1000) times the member's configured capacity, or that
//     is not newer than the member's newest report (a replay or a
//     reordering) is refused and changes nothing, so a member whose pushes
//     are all refused goes stale and is polled. Order is by time, not seq:
//     seq starts again at 1 when a mirror restarts, and a lower seq with a
//     newer time is a restarted mirror's. A pulled report with an absurd
//     load is a failed probe (reason "validate"); one whose time is outside
//     the limits is taken, timed by dnsd's clock (the figures are as fresh
//     as the probe), and counted: its member's clock is off.
//   - A trace's first line is read, at most MaxTraceLine (256) bytes, for
//     every report: it is one small file, and a generation read when the
//     report is made is never older than the report. A trace that gives no
//     generation leaves the report's out (never a failed report) and is
//     counted (transmirror_mirror_trace_errors_total).
//   - The Watcher runs one scheduler goroutine over a timer heap, at most one
//     probe per member in flight and at most MaxInFlight (default 256)
//     probes in all; each probe gets its member's timeout (default 80 % of
//     the interval, at most 10 s) as a context deadline and nothing else.
//     Run returns after the probes in flight have finished.
//
// Metrics (namespace transmirror, subsystem probe):
//
//	transmirror_probe_probes_total{group,result}          counter, result is success or failure
//	transmirror_probe_failures_total{group,reason}        counter, reason is a Reason
//	transmirror_probe_duration_seconds{group}             histogram of pull probe durations
//	transmirror_probe_member_state{group,member,state}    gauge, 1 for the member's current state (unknown, up, down)
//	transmirror_probe_state_changes_total{group,to}       counter of health flips
//	transmirror_probe_pushes_total{group,result}          counter, result is accepted or rejected; group is "" when unknown
//	transmirror_probe_retimed_reports_total{group}        counter of pulled reports timed by dnsd's clock (the member's is off)
//	transmirror_probe_in_flight_probes                    gauge
//
// The label values of a member are deleted when it is removed, and those of
// a group when its last member is removed.
package probe
