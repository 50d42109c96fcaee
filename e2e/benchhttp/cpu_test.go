package benchhttp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100
// on every Linux architecture Go runs on.
const userHZ = 100

// statFields returns the parent PID (field 4) and utime+stime (fields 14
// and 15, in USER_HZ ticks) of a /proc/PID/stat line. The command name,
// field 2, may hold spaces and parentheses, so the fields are counted
// after its last ')'.
func statFields(line string) (ppid int, ticks int64, err error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, 0, errors.New("/proc/PID/stat: no ')' after the command name")
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/PID/stat: %d fields after the command name, want at least 13", len(f))
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, fmt.Errorf("/proc/PID/stat: ppid: %w", err)
	}
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/PID/stat: utime or stime: %w", err)
		}
		ticks += v
	}
	return ppid, ticks, nil
}

// procStat reads statFields of process pid.
func procStat(pid int) (ppid int, ticks int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	return statFields(string(data))
}

// children returns the PIDs whose parent is pid, in order, from a scan
// of /proc (nginx's workers are its master's children).
func children(pid int) ([]int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		ppid, _, err := procStat(p)
		if err == nil && ppid == pid {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// cpuSample is the CPU time of a set of server processes (each one and
// its children) at one moment, and which processes they were.
type cpuSample struct {
	ticks int64
	pids  []int
}

// sampleCPU sums utime+stime over each of pids and its children.
func sampleCPU(pids ...int) (cpuSample, error) {
	var s cpuSample
	for _, pid := range pids {
		kids, err := children(pid)
		if err != nil {
			return s, err
		}
		for _, p := range append([]int{pid}, kids...) {
			_, t, err := procStat(p)
			if err != nil {
				return s, fmt.Errorf("pid %d: %w", p, err)
			}
			s.ticks += t
			s.pids = append(s.pids, p)
		}
	}
	return s, nil
}

// since returns the CPU seconds from a to b; it fails when the set of
// processes changed in between (a worker that died and was replaced
// would take its time with it).
func (b cpuSample) since(a cpuSample) (float64, error) {
	if !slices.Equal(a.pids, b.pids) {
		return 0, fmt.Errorf("benchhttp: the processes changed during a run: %v, then %v", a.pids, b.pids)
	}
	return float64(b.ticks-a.ticks) / userHZ, nil
}

// machineBusy returns the CPU time all CPUs were busy so far (the
// line "cpu" of /proc/stat), seconds.
func machineBusy() (float64, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	ticks, err := busyTicks(line)
	return float64(ticks) / userHZ, err
}

// busyTicks reads "cpu user nice system idle iowait irq softirq steal
// …" and returns the ticks of all but idle and iowait among the first
// eight (guest time is already inside user).
func busyTicks(line string) (int64, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var busy int64
	for i, s := range f[1:9] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, nil
}
