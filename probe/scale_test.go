//go:build unix

package probe

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

type scaleResult struct {
	probes      int64
	elapsed     time.Duration
	cpu         time.Duration // user + system, whole process (fake mirrors included)
	up, members int
	conns       int64
}

func (r scaleResult) probesPerSecond() float64 { return float64(r.probes) / r.elapsed.Seconds() }
func (r scaleResult) cpuPerSecond() float64    { return r.cpu.Seconds() / r.elapsed.Seconds() }

func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runScale watches members fake mirrors, all on one loopback server, at
// interval: one interval of warm-up, then measured intervals, then it
// waits (with a deadline) for every member to be up.
func runScale(tb testing.TB, members int, interval time.Duration, measured int) scaleResult {
	f := newFakeMirrors(tb)
	env := newWatcherEnv(tb, WatcherConfig{})
	for i := range members {
		g, m := fmt.Sprint("g", i%10), fmt.Sprint("m", i)
		if err := env.w.Add(MemberSpec{Group: g, Member: m, URL: f.add(g, m), Interval: interval}); err != nil {
			tb.Fatal(err)
		}
	}
	env.start(tb)
	probes := func() int64 {
		var n int64
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, fm := range f.state {
			n += fm.requests.Load()
		}
		return n
	}
	// Warm-up: the first interval opens the connections.
	warm := time.NewTimer(interval)
	<-warm.C
	p0, c0, t0 := probes(), cpuTime(tb), time.Now()
	run := time.NewTimer(time.Duration(measured) * interval)
	<-run.C
	res := scaleResult{probes: probes() - p0, elapsed: time.Since(t0), cpu: cpuTime(tb) - c0, members: members}
	allUp := func() bool {
		res.up = 0
		for _, st := range env.w.Members("") {
			if st.State == StateUp {
				res.up++
			}
		}
		return res.up == members
	}
	eventually(tb, 3*interval, "every member up", allUp)
	res.conns = f.conns.Load()
	env.stop()
	return res
}

func TestWatcherScale500(t *testing.T) {
	const members, interval = 500, time.Second
	res := runScale(t, members, interval, 1)
	want := float64(members) / interval.Seconds()
	t.Logf("%d members at %s: %.0f probes/s (want %.0f), %.3f CPU-s/s, %.1f µs CPU/probe, %d connections",
		members, interval, res.probesPerSecond(), want, res.cpuPerSecond(),
		float64(res.cpu.Microseconds())/float64(res.probes), res.conns)
	if got := res.probesPerSecond(); got < 0.7*want || got > 1.3*want {
		t.Errorf("%.0f probes/s, want about %.0f", got, want)
	}
	if res.conns > 64 {
		t.Errorf("%d connections for %d probes: keep-alive not working", res.conns, res.probes)
	}
}

// BenchmarkWatcher5000 is the scale figure: 5,000 members at a 5 s
// interval for two intervals after one of warm-up (about 15 s, run once
// whatever b.N). Run with -cpu 1 to hold it to one core.
func BenchmarkWatcher5000(b *testing.B) {
	const members, interval = 5000, 5 * time.Second
	for range b.N {
		res := runScale(b, members, interval, 2)
		b.ReportMetric(res.probesPerSecond(), "probes/s")
		b.ReportMetric(res.cpuPerSecond(), "cpu-s/s")
		b.ReportMetric(float64(res.cpu.Microseconds())/float64(res.probes), "cpu-µs/probe")
		b.ReportMetric(float64(res.conns), "conns")
	}
}
