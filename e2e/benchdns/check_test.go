package benchdns

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/scheduler"
)

// answerCase is one question asked of both servers with dig, n times,
// and the addresses it must get: one per answer, and every one of them
// over the n answers.
type answerCase struct {
	name string
	args []string // dig query options, name and type
	n    int
	want []string
}

// answerCases are the static name, the group from each region's ECS
// network of each family, the group's AAAA and the group without ECS.
func answerCases() []answerCase {
	addrs := func(r string, v6 bool) []string {
		var out []string
		for _, m := range regionMembers(r) {
			if v6 {
				out = append(out, m.v6)
			} else {
				out = append(out, m.v4)
			}
		}
		return out
	}
	// 40 answers miss a member of weight 1 in 4 with probability 0.75⁴⁰ ≈ 1e-5.
	cases := []answerCase{{name: "static A, no EDNS", args: []string{staticName, "A"}, n: 5, want: []string{staticAddr}}}
	for _, r := range regions {
		for _, ecs := range []string{r.ecs4, r.ecs6} {
			cases = append(cases, answerCase{
				name: fmt.Sprintf("www A, ECS %s (%s)", ecs, r.name),
				args: []string{"+subnet=" + ecs, groupName, "A"}, n: 40, want: addrs(r.name, false),
			})
		}
	}
	cases = append(cases,
		answerCase{name: "www AAAA, ECS " + regions[0].ecs4 + " (" + regions[0].name + ")",
			args: []string{"+subnet=" + regions[0].ecs4, groupName, "AAAA"}, n: 40, want: addrs(regions[0].name, true)},
		answerCase{name: "www A, no EDNS (" + defaultRegion + ", the default)",
			args: []string{groupName, "A"}, n: 40, want: addrs(defaultRegion, false)},
	)
	return cases
}

// digAnswers asks s the case's question n times in one dig run and
// returns the addresses, one line per answer record.
func digAnswers(ctx context.Context, s *server, c answerCase) ([]string, error) {
	host, port, err := net.SplitHostPort(s.addr)
	if err != nil {
		return nil, err
	}
	args := []string{"@" + host, "-p", port, "+short", "+tries=1", "+time=2"}
	opts, q := c.args[:len(c.args)-2], c.args[len(c.args)-2:]
	args = append(args, opts...) // before the first name: for every query
	for range c.n {
		args = append(args, q...)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "dig", args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("dig %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.Fields(string(out)), nil
}

// checkAnswers runs every case against s: exactly n addresses, each one
// of want, together all of want.
func checkAnswers(ctx context.Context, s *server, c answerCase) error {
	got, err := digAnswers(ctx, s, c)
	if err != nil {
		return err
	}
	if len(got) != c.n {
		return fmt.Errorf("%s: %s: %d addresses for %d queries, want one each: %v", s.name, c.name, len(got), c.n, got)
	}
	seen := map[string]int{}
	for _, a := range got {
		if !slices.Contains(c.want, a) {
			return fmt.Errorf("%s: %s: answer %s, want one of %v", s.name, c.name, a, c.want)
		}
		seen[a]++
	}
	if len(seen) != len(c.want) {
		return fmt.Errorf("%s: %s: %d answers gave %v, want all of %v", s.name, c.name, c.n, seen, c.want)
	}
	return nil
}

// weightShare asks s n times for the group with ECS from prefix and
// returns the share of the answers that named addr.
func weightShare(s *server, prefix, addr string, n int) (float64, error) {
	c := &dns.Client{Timeout: 2 * time.Second}
	q, err := ecsQuery(groupName, dns.TypeA, prefix)
	if err != nil {
		return 0, err
	}
	hits := 0
	for range n {
		r, _, err := c.Exchange(q, s.addr)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", s.name, err)
		}
		if len(r.Answer) != 1 {
			return 0, fmt.Errorf("%s: %d answers, want 1:\n%v", s.name, len(r.Answer), r)
		}
		if a, ok := r.Answer[0].(*dns.A); ok && a.A.String() == addr {
			hits++
		}
	}
	return float64(hits) / float64(n), nil
}

// weightOf is the share member name should get of its region.
func weightOf(name string) (float64, string) {
	for _, m := range members {
		if m.name == name {
			sum := 0
			for _, x := range regionMembers(m.region) {
				sum += x.weight
			}
			return float64(m.weight) / float64(sum), m.region + " " + strconv.Itoa(m.weight) + ":" + strconv.Itoa(sum-m.weight)
		}
	}
	return 0, ""
}

// checkBig asks s (dnsd) for big from each region's IPv4 ECS network, 40
// times: every answer is one of big's members, and near the region (less
// than 3,000 km from its first www member; a member drawn from the whole
// globe would be that near about one time in six).
func checkBig(ctx context.Context, s *server) error {
	near := map[string]member{}
	for _, m := range bigGroup() {
		near[m.v4] = m
	}
	for _, r := range regions {
		c := answerCase{name: "big A, ECS " + r.ecs4 + " (" + r.name + ")", args: []string{"+subnet=" + r.ecs4, bigName, "A"}, n: 40}
		got, err := digAnswers(ctx, s, c)
		if err != nil {
			return err
		}
		if len(got) != c.n {
			return fmt.Errorf("%s: %s: %d addresses for %d queries, want one each", s.name, c.name, len(got), c.n)
		}
		home := regionMembers(r.name)[0]
		for _, a := range got {
			m, ok := near[a]
			if !ok {
				return fmt.Errorf("%s: %s: answer %s is not a member of big", s.name, c.name, a)
			}
			if d := scheduler.DistanceKm(coords(m), coords(home)); d > 3000 {
				return fmt.Errorf("%s: %s: answer %s (%s) is %.0f km from %s", s.name, c.name, a, m.name, d, home.name)
			}
		}
	}
	return nil
}

func coords(m member) scheduler.Location {
	return scheduler.Location{Lat: m.lat, Lon: m.lon, HasCoords: true}
}
