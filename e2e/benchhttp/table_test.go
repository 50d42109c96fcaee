package benchhttp

import (
	"fmt"
	"slices"
	"strings"
)

// sample is one measured wrk run through one front end.
type sample struct {
	wrkResult
	feCPU, beCPU float64 // CPU seconds of the front end and of the back ends over the run
	// others is the CPU time the rest of the machine took meanwhile
	// (all busy time but the servers' and wrk's), seconds.
	others  float64
	seconds float64 // the run's wall time
}

// othersShare is others as a share of one core over the run.
func (s sample) othersShare() float64 { return ratio(s.others, s.seconds) }

// perRequest returns the front end's and the back ends' CPU per
// request, seconds; 0 without requests.
func (s sample) perRequest() (fe, be float64) {
	if s.requests == 0 {
		return 0, 0
	}
	n := float64(s.requests)
	return s.feCPU / n, s.beCPU / n
}

// measured holds every sample: by kind name, then front end key, one
// per round in the order of the rounds.
type measured map[string]map[string][]sample

// add records s as the next round's sample of front end fe on kind k.
func (m measured) add(k, fe string, s sample) {
	if m[k] == nil {
		m[k] = map[string][]sample{}
	}
	m[k][fe] = append(m[k][fe], s)
}

// row is one line of the table: a front end on a kind of response,
// the medians over the rounds, and the medians of the ratios to its
// reference taken within each round.
type row struct {
	kind, label, vs string // vs: the reference's label, "" for none
	rounds          int
	rps, p99        float64 // requests/s, seconds
	fe, be          float64 // CPU seconds per request
	rpsX, feX, beX  float64 // ratios to the reference
	errors          int64
}

// rows summarises m for the kinds and front ends, in their order; a
// front end whose reference was not measured has no ratios.
func rows(m measured, ks []kind, fes []frontEnd) []row {
	label := map[string]string{}
	for _, fe := range fes {
		label[fe.key] = fe.label
	}
	var out []row
	for _, k := range ks {
		for _, fe := range fes {
			ss := m[k.name][fe.key]
			if len(ss) == 0 {
				continue
			}
			r := summarize(ss, m[k.name][fe.ref])
			r.kind, r.label = k.name, fe.label
			if fe.ref != "" && len(m[k.name][fe.ref]) == len(ss) {
				r.vs = label[fe.ref]
			}
			out = append(out, r)
		}
	}
	return out
}

// summarize makes a row of the samples ss and, when refs has as many
// (one per round), the ratios to them round by round.
func summarize(ss, refs []sample) row {
	var rps, p99, fe, be, rpsX, feX, beX []float64
	r := row{rounds: len(ss)}
	for i, s := range ss {
		f, b := s.perRequest()
		rps, p99, fe, be = append(rps, s.rps), append(p99, s.p99), append(fe, f), append(be, b)
		r.errors += s.errors()
		if len(refs) != len(ss) {
			continue
		}
		rf, rb := refs[i].perRequest()
		rpsX, feX, beX = append(rpsX, ratio(s.rps, refs[i].rps)), append(feX, ratio(f, rf)), append(beX, ratio(b, rb))
	}
	r.rps, r.p99, r.fe, r.be = median(rps), median(p99), median(fe), median(be)
	r.rpsX, r.feX, r.beX = median(rpsX), median(feX), median(beX)
	return r
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// median of xs, the mean of the middle two for an even count, 0 for
// none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}

// table formats rows, a blank line between kinds: the figures, then the
// ratios to the reference named in the column vs ("-" where none).
func table(rs []row) string {
	var s strings.Builder
	s.WriteString("medians over the rounds; ratios taken within each round against the front end named in vs\n")
	line := func(cols ...string) {
		l := fmt.Sprintf("%-22s  %-30s  %8s  %8s  %9s  %9s  %8s  %8s  %8s  %6s  %s", asArgs(cols)...)
		s.WriteString(strings.TrimRight(l, " ") + "\n")
	}
	line("response", "front end", "req/s", "p99 ms", "FE µs/req", "BE µs/req", "req/s ×", "FE CPU ×", "BE CPU ×", "errors", "vs")
	prev := ""
	for _, r := range rs {
		if prev != "" && r.kind != prev {
			s.WriteString("\n")
		}
		prev = r.kind
		x := func(v float64) string {
			if r.vs == "" {
				return "-"
			}
			return fmt.Sprintf("%.2f×", v)
		}
		vs := r.vs
		if vs == "" {
			vs = "-"
		}
		line(r.kind, r.label, fmt.Sprintf("%.0f", r.rps), fmt.Sprintf("%.2f", 1e3*r.p99),
			fmt.Sprintf("%.1f", 1e6*r.fe), fmt.Sprintf("%.1f", 1e6*r.be),
			x(r.rpsX), x(r.feX), x(r.beX), fmt.Sprint(r.errors), vs)
	}
	return s.String()
}

// asArgs is cols as arguments of Sprintf.
func asArgs(cols []string) []any {
	out := make([]any, len(cols))
	for i, c := range cols {
		out[i] = c
	}
	return out
}

// othersLine says how much CPU the rest of the machine took during the
// measured runs: the median and the most, as shares of one core.
func othersLine(m measured) string {
	var xs []float64
	for _, byFE := range m {
		for _, ss := range byFE {
			for _, s := range ss {
				xs = append(xs, s.othersShare())
			}
		}
	}
	if len(xs) == 0 {
		return ""
	}
	return fmt.Sprintf("the rest of the machine (all but the servers and wrk) during the %d measured runs: median %.0f%%, most %.0f%% of a core\n",
		len(xs), 100*median(xs), 100*slices.Max(xs))
}
