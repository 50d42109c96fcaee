package benchhttp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what wrk reported of one run (wrk --latency).
type wrkResult struct {
	requests int64
	rps      float64
	p99      float64 // seconds
	// sockErrs are wrk's socket errors (connect, read, write, timeout),
	// badStatus its responses other than 2xx or 3xx.
	sockErrs, badStatus int64
	cpu                 float64 // wrk's own CPU seconds (user and system)
}

// errors is every failed request of the run.
func (w wrkResult) errors() int64 { return w.sockErrs + w.badStatus }

// parseWrk reads wrk 4's report:
//
//	  Latency Distribution
//	     99%    1.90ms
//	  60000 requests in 2.00s, 250.00MB read
//	  Socket errors: connect 0, read 0, write 0, timeout 0
//	  Non-2xx or 3xx responses: 5
//	Requests/sec:  30000.00
//
// The socket and status lines are there only when not zero.
func parseWrk(out string) (wrkResult, error) {
	var w wrkResult
	var seen int
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		var err error
		switch {
		case len(f) == 2 && f[0] == "99%":
			w.p99, err = parseWrkTime(f[1])
			seen++
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			w.requests, err = strconv.ParseInt(f[0], 10, 64)
			seen++
		case len(f) == 2 && f[0] == "Requests/sec:":
			w.rps, err = strconv.ParseFloat(f[1], 64)
			seen++
		case strings.HasPrefix(strings.TrimSpace(line), "Socket errors:"):
			w.sockErrs, err = sumCounts(strings.TrimPrefix(strings.TrimSpace(line), "Socket errors:"))
		case strings.HasPrefix(strings.TrimSpace(line), "Non-2xx or 3xx responses:") && len(f) == 5:
			w.badStatus, err = strconv.ParseInt(f[4], 10, 64)
		}
		if err != nil {
			return w, fmt.Errorf("wrk output %q: %w", strings.TrimSpace(line), err)
		}
	}
	if seen != 3 {
		return w, errors.New("wrk output: no 99th percentile, request count or rate (wrk --latency)")
	}
	return w, nil
}

// sumCounts adds up "connect 0, read 1, write 0, timeout 2".
func sumCounts(s string) (int64, error) {
	var sum int64
	for _, part := range strings.Split(s, ",") {
		f := strings.Fields(part)
		if len(f) != 2 {
			return 0, fmt.Errorf("count %q", part)
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// parseWrkTime reads one of wrk's times, "850.00us", "1.90ms", "1.20s",
// "2.00m", into seconds.
func parseWrkTime(s string) (float64, error) {
	units := []struct {
		suffix string
		scale  float64
	}{{"us", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("time %q: %w", s, err)
			}
			return x * u.scale, nil
		}
	}
	return 0, fmt.Errorf("time %q: no unit", s)
}

// mixScript is a wrk Lua script that sends the paths in turn, each
// request formatted once (with wrk's -H headers) before the run.
func mixScript(paths []string) string {
	var s strings.Builder
	s.WriteString("local paths = {\n")
	for _, p := range paths {
		fmt.Fprintf(&s, "  %q,\n", p)
	}
	s.WriteString(`}
local reqs = {}
local i = 0
init = function(args)
  for k, p in ipairs(paths) do reqs[k] = wrk.format(nil, p) end
end
request = function()
  i = i % #reqs + 1
  return reqs[i]
end
`)
	return s.String()
}

// wrkRun is one wrk invocation: where to, how long, with which script
// and whether each request asks for its own connection.
type wrkRun struct {
	bin, cpus   string
	url, script string // script: "" for none
	conns       int
	duration    time.Duration
	close       bool // Connection: close on every request
}

// run starts wrk pinned to its CPUs, one thread, waits for it (bounded
// by its duration and a minute) and parses its report.
func (r wrkRun) run(ctx context.Context) (wrkResult, error) {
	args := []string{"-c", r.cpus, r.bin, "-t", "1", "-c", strconv.Itoa(r.conns),
		"-d", strconv.Itoa(int(r.duration.Round(time.Second)/time.Second)) + "s", "--timeout", "10s", "--latency"}
	if r.script != "" {
		args = append(args, "-s", r.script)
	}
	if r.close {
		args = append(args, "-H", "Connection: close")
	}
	args = append(args, r.url)
	ctx, cancel := context.WithTimeout(ctx, r.duration+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "taskset", args...)
	cmd.Env = append(os.Environ(), "http_proxy=", "HTTP_PROXY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %w\n%s", strings.Join(args[2:], " "), err, out)
	}
	w, err := parseWrk(string(out))
	if err != nil {
		return w, fmt.Errorf("%w\n%s", err, out)
	}
	w.cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	return w, nil
}
