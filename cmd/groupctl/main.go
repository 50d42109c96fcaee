// Command groupctl is the operator's tool for transmirror's mirror groups:
// it talks to dnsd's admin API.
//
// Usage:
//
//	groupctl [-server URL] [-ca-file F] [-o table|json] [-secret-file F] COMMAND ...
//	groupctl -version
//
// See usage below for the commands; -version prints the module version,
// the commit, its time and the Go version on one line and exits 0. Writes
// are signed with the group's secret (-secret-file, or
// $TRANSMIRROR_SECRET).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: groupctl [-server URL] [-ca-file FILE] [-o table|json] [-secret-file FILE] COMMAND ...
       groupctl -version

commands:
  list                          the groups, with how many members are up
  status GROUP                  GROUP-QUERY: every member's state, load and answer share
  add GROUP -name N -host H -addr IP[,IP] -capacity C [-lat L -lon L] [-country CC]
      [-continent CC] [-weight W] [-probe URL]
                                GROUP-ADD (signed)
  remove GROUP MEMBER           GROUP-EXIT (signed)
  drain GROUP MEMBER            stop answering with MEMBER, keep probing it (signed)
  undrain GROUP MEMBER          answer with MEMBER again (signed)
  where GROUP PATH [-json]      which members hold the file PATH: size, mtime, best copy, state, generation, lag
  explain GROUP -client IP [-ecs PREFIX] [-type A|AAAA]
                                why dnsd answers GROUP the way it does for this client
  acme list                     the live ACME DNS-01 challenges that dnsd serves
  acme publish|remove GROUP MEMBER NAME VALUE
                                serve (or stop serving) _acme-challenge.NAME TXT VALUE for MEMBER (signed)
  load [-dns ADDR] [-subnet PREFIX] [-rate N] [-duration D] URL   bounded demo load, loopback only (load -h)

The secret of signed commands comes from -secret-file or $TRANSMIRROR_SECRET.
An https -server whose certificate a private CA signed is verified with
-ca-file or $TRANSMIRROR_CA.
`

// global holds the flags that come before the command.
type global struct {
	server     string
	output     string
	secretFile string
	caFile     string
	http       *http.Client
	stdout     io.Writer
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("groupctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	g := &global{stdout: stdout, http: &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, // a signature covers one URL
	}}
	def := os.Getenv("TRANSMIRROR_ADMIN")
	if def == "" {
		def = "http://127.0.0.1:8053"
	}
	fs.StringVar(&g.server, "server", def, "dnsd admin URL (or $TRANSMIRROR_ADMIN)")
	fs.StringVar(&g.output, "o", "table", "output: table or json")
	fs.StringVar(&g.secretFile, "secret-file", "", "file holding the group secret for signed commands (or $TRANSMIRROR_SECRET)")
	fs.StringVar(&g.caFile, "ca-file", os.Getenv("TRANSMIRROR_CA"), "PEM CA certificates that an https -server's certificate may chain to, besides the system's (or $TRANSMIRROR_CA)")
	var version bool
	buildinfo.Flag(fs, &version)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if version {
		fmt.Fprintln(stdout, buildinfo.Version("groupctl"))
		return 0
	}
	if g.output != "table" && g.output != "json" {
		fmt.Fprintf(stderr, "groupctl: -o %q: want table or json\n", g.output)
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if g.caFile != "" {
		tr, err := certs.Transport(g.caFile)
		if err != nil {
			fmt.Fprintln(stderr, "groupctl:", err)
			return 2
		}
		g.http.Transport = tr
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	known, err := g.command(ctx, fs.Arg(0), fs.Args()[1:], stderr)
	if !known {
		fmt.Fprintf(stderr, "groupctl: unknown command %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	return exitCode(err, stderr)
}

// command runs cmd with its arguments; known is false for a command
// that groupctl does not have.
func (g *global) command(ctx context.Context, cmd string, rest []string, stderr io.Writer) (known bool, err error) {
	switch cmd {
	case "explain":
		return true, g.explain(ctx, rest, stderr)
	case "load":
		return true, g.load(ctx, rest, stderr)
	case "acme":
		return true, g.acme(ctx, rest)
	case "list":
		return true, g.list(ctx, rest)
	case "status":
		return true, g.status(ctx, rest)
	case "where":
		return true, g.where(ctx, rest, stderr)
	case "add":
		return true, g.add(ctx, rest, stderr)
	case "remove", "drain", "undrain":
		return true, g.memberOp(ctx, rest, cmd)
	}
	return false, nil
}

// exitCode writes what err says and returns groupctl's exit status: 0
// done, 1 failed (dnsd's status and reason when it refused), 2 bad usage.
func exitCode(err error, stderr io.Writer) int {
	var ue usageError
	var se *api.StatusError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "groupctl:", err)
		return 2
	case errors.As(err, &se): // the status and dnsd's reason
		fmt.Fprintf(stderr, "groupctl: %s: %s\n", se.Status, se.Message)
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "groupctl:", err)
		return 1
	}
	return 0
}

// usageError is a mistake on the command line (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// parseInterleaved parses flags that may come before or after the
// positional arguments ("explain www -client 1.2.3.4").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// client returns the admin API client, with the group secret when signed.
func (g *global) client(signed bool) (*api.Client, error) {
	o := api.ClientOptions{HTTP: g.http}
	if signed {
		secret, err := g.secret()
		if err != nil {
			return nil, err
		}
		o.Secret = secret
	}
	return api.NewClient(g.server, o)
}

// printJSON writes v as one line of JSON, with "<", ">" and "&" as they
// are (dnsd's own encoding).
func (g *global) printJSON(v any) error {
	enc := json.NewEncoder(g.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// secret reads the group secret for signed commands.
func (g *global) secret() ([]byte, error) {
	if g.secretFile != "" {
		b, err := os.ReadFile(g.secretFile)
		if err != nil {
			return nil, err
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return nil, fmt.Errorf("secret file %s is empty", g.secretFile)
		}
		return []byte(s), nil
	}
	if s := os.Getenv("TRANSMIRROR_SECRET"); s != "" {
		return []byte(s), nil
	}
	return nil, usageError{"signed command: give -secret-file FILE or set $TRANSMIRROR_SECRET"}
}

func (g *global) explain(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	client := fs.String("client", "", "client (or resolver) IP address")
	ecs := fs.String("ecs", "", "EDNS Client Subnet prefix, e.g. 198.51.100.0/24")
	qtype := fs.String("type", "A", "A or AAAA")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *client == "" {
		return usageError{"usage: groupctl explain GROUP -client IP [-ecs PREFIX] [-type A|AAAA]"}
	}
	c, err := g.client(false)
	if err != nil {
		return err
	}
	e, err := c.Explain(ctx, pos[0], api.ExplainQuery{Client: *client, ECS: *ecs, Qtype: *qtype})
	if err != nil {
		return err
	}
	if g.output == "json" {
		return g.printJSON(e)
	}
	return printExplanation(g.stdout, &e)
}

func printExplanation(w io.Writer, e *api.Explanation) error {
	loc := strings.TrimSpace(e.Location.Country + " " + e.Location.Continent)
	if e.Location.Lat != nil && e.Location.Lon != nil {
		loc += fmt.Sprintf(" (%.2f, %.2f)", *e.Location.Lat, *e.Location.Lon)
	}
	if loc == "" {
		loc = "unknown"
	}
	fmt.Fprintf(w, "group:   %s %s (policy %s)\n", e.Group, e.Qtype, e.Policy)
	fmt.Fprintf(w, "client:  %s", e.Client)
	if e.ECS != "" {
		fmt.Fprintf(w, ", ECS %s (%s)", e.ECS, e.ECSUse)
	}
	fmt.Fprintf(w, ", located by %s as %s at %s\n", e.ClientPrefix, e.Source, loc)
	scope := "no ECS option"
	if e.Scope >= 0 {
		scope = fmt.Sprintf("ECS scope /%d", e.Scope)
	}
	fmt.Fprintf(w, "answer:  %s  [%s]  TTL %d, %s\n", strings.Join(e.Answer, " "), strings.Join(e.Addresses, " "), e.TTL, scope)
	if e.FailOpen {
		fmt.Fprintln(w, "         FAIL-OPEN: no member is up")
	}
	fmt.Fprintf(w, "why:     %s\n", e.Why)
	printRedirects(w, e.Redirects)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTATE\tDISTANCE\tUTIL\tLOAD\tPENDING\tCAPACITY\tWEIGHT\tSERVES\tPICKED\tNOTE")
	for _, m := range e.Members {
		picked := ""
		if m.Picked {
			picked = "*"
		}
		serves := strings.Join(m.Serves, ",")
		if serves == "" {
			serves = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f km\t%.2f\t%g\t%g\t%g\t%g\t%s\t%s\t%s\n",
			m.Name, m.State, m.DistanceKm, m.Utilization, m.Load, m.Pending, m.Capacity, m.Weight, serves, picked, m.Note)
	}
	return tw.Flush()
}

// printRedirects writes the filter of a mirror's redirect for the
// client, when dnsd gave it: whom an http and an https request may be
// sent to, and why the others may not.
func printRedirects(w io.Writer, f *api.RedirectFilter) {
	if f == nil {
		return
	}
	list := func(names []string) string {
		if len(names) == 0 {
			return "none (the mirror serves the request itself)"
		}
		return strings.Join(names, " ")
	}
	fmt.Fprintf(w, "302s:    an %s client's http request may go to %s; its https request to %s\n", f.Family, list(f.HTTP), list(f.HTTPS))
	for _, x := range f.Excluded {
		fmt.Fprintf(w, "         %s not for %s: %s\n", x.Name, strings.Join(x.From, ", "), x.Reason)
	}
}

func (g *global) list(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return usageError{"usage: groupctl list"}
	}
	c, err := g.client(false)
	if err != nil {
		return err
	}
	l, err := c.Groups(ctx)
	if err != nil {
		return err
	}
	if g.output == "json" {
		return g.printJSON(l)
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tPOLICY\tMEMBERS\tUP\tFAIL-OPEN")
	for _, s := range l.Groups {
		fo := ""
		if s.FailOpen {
			fo = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", s.Name, s.Policy, s.Members, s.Up, fo)
	}
	return tw.Flush()
}

func (g *global) status(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageError{"usage: groupctl status GROUP"}
	}
	c, err := g.client(false)
	if err != nil {
		return err
	}
	v, err := c.Group(ctx, args[0])
	if err != nil {
		return err
	}
	if g.output == "json" {
		return g.printJSON(v)
	}
	fmt.Fprintf(g.stdout, "group %s: policy %s, %d per answer, TTL %d..%d s, watermarks %.2f/%.2f",
		v.Name, v.Policy, v.Answers, v.TTL.Min, v.TTL.Max, v.Watermarks.Low, v.Watermarks.High)
	if v.MaxLag > 0 {
		fmt.Fprintf(g.stdout, ", max lag %s", time.Duration(v.MaxLag)*time.Second)
	}
	if v.FailOpen {
		fmt.Fprint(g.stdout, ", FAIL-OPEN")
	}
	if v.LagFailOpen {
		fmt.Fprint(g.stdout, ", LAG-FAIL-OPEN (every member lags: the freshest answer)")
	}
	fmt.Fprintln(g.stdout)
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTATE\tSOURCE\tHOST\tADDRESSES\tSCHEMES\tLOAD\tCAPACITY\tBANDWIDTH\tBW-UTIL\tUTIL\tANSWERS\tCAP-SHARE\tREPORT-AGE\tGENERATION\tLAG\tRESCUED")
	for _, m := range v.Members {
		age := "-"
		if m.LastReport != nil {
			age = fmt.Sprintf("%.1fs", m.ReportAge)
		}
		bw, bwUtil := "-", "-"
		if m.Bandwidth > 0 {
			bw, bwUtil = yamlconf.Bandwidth(m.Bandwidth).String(), fmt.Sprintf("%.2f", m.BandwidthUtilization)
		}
		source := m.Source
		if m.Joined {
			source = "joined" // a run-time member that added itself
		}
		gen, lag := generation(m)
		rescued, schemes := "-", "-"
		if m.LastReport != nil {
			rescued, schemes = strconv.FormatUint(m.Rescued, 10), schemesOf(*m.LastReport)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%g\t%s\t%s\t%.2f\t%.0f%%\t%.0f%%\t%s\t%s\t%s\t%s\n",
			m.Name, m.State, source, m.Host, strings.Join(m.Addresses, ","), schemes, m.Load, m.Capacity,
			bw, bwUtil, m.Utilization, 100*m.AnswerShare, 100*m.CapacityShare, age, gen, lag, rescued)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return g.printTop(v.Top)
}

// schemesOf is what a member's report says it serves a redirected client
// on, as the siblings read it (an older mirror's report: http).
func schemesOf(r probe.Report) string {
	var out []string
	for _, sc := range []string{probe.SchemeHTTP, probe.SchemeHTTPS} {
		if r.Serves(sc) {
			out = append(out, sc)
		}
	}
	return strings.Join(out, ",")
}

// printTop prints a group's most requested paths, when it has any: the
// requests of each (decayed, about the last minutes) and the path.
func (g *global) printTop(top []probe.PathCount) error {
	if len(top) == 0 {
		return nil
	}
	fmt.Fprintln(g.stdout, "most requested (requests, halved every 5 min):")
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REQUESTS\tPATH")
	for _, pc := range top {
		fmt.Fprintf(tw, "%g\t%s\n", pc.Count, pc.Path)
	}
	return tw.Flush()
}

// generation returns a member's generation and its lag behind the
// group's newest as status shows them, "-" for a member that reports
// none.
func generation(m api.MemberView) (gen, lag string) {
	if m.Generation.IsZero() {
		return "-", "-"
	}
	return m.Generation.UTC().Format(time.RFC3339), (time.Duration(m.Lag) * time.Second).String()
}

func (g *global) add(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("add", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var info api.MemberInfo
	var addrs, country, continent string
	var lat, lon float64
	var bandwidth yamlconf.Bandwidth
	fs.StringVar(&info.Name, "name", "", "member name ([a-z0-9-]+)")
	fs.StringVar(&info.Host, "host", "", "the member's own host name")
	fs.StringVar(&addrs, "addr", "", "IPv4/IPv6 addresses, comma separated")
	fs.Float64Var(&info.Capacity, "capacity", 0, "capacity in load units (> 0)")
	fs.TextVar(&bandwidth, "bandwidth", yamlconf.Bandwidth(0), "the member's uplink, e.g. 1Gbit/s, 100Mbit/s or 12.5MB/s (0: no limit)")
	fs.Float64Var(&info.Weight, "weight", 0, "static weight (default 1)")
	fs.StringVar(&info.Probe, "probe", "", "load report URL ("+string(api.LoadReport)+")")
	fs.Float64Var(&lat, "lat", 0, "latitude")
	fs.Float64Var(&lon, "lon", 0, "longitude")
	fs.StringVar(&country, "country", "", "ISO country code")
	fs.StringVar(&continent, "continent", "", "continent code (EU, NA, AS, …)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || info.Name == "" {
		return usageError{"usage: groupctl add GROUP -name N -host H -addr IP[,IP] -capacity C [...]"}
	}
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			info.Addresses = append(info.Addresses, a)
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "lat":
			info.Location.Lat = &lat
		case "lon":
			info.Location.Lon = &lon
		}
	})
	info.Location.Country, info.Location.Continent = country, continent
	info.Bandwidth = bandwidth.BytesPerSecond()
	c, err := g.client(true)
	if err != nil {
		return err
	}
	out, err := c.AddMember(ctx, pos[0], info)
	if err != nil {
		return err
	}
	if g.output == "json" {
		return g.printJSON(out)
	}
	_, err = fmt.Fprintf(g.stdout, "added %s to %s (%s)\n", out.Name, pos[0], strings.Join(out.Addresses, ", "))
	return err
}

// memberOp is remove, drain and undrain: a signed request on one member.
func (g *global) memberOp(ctx context.Context, args []string, cmd string) error {
	if len(args) != 2 {
		return usageError{"usage: groupctl remove|drain|undrain GROUP MEMBER"}
	}
	c, err := g.client(true)
	if err != nil {
		return err
	}
	var out any
	var done string
	switch cmd {
	case "remove":
		out, err = c.RemoveMember(ctx, args[0], args[1])
		done = "removed"
	case "drain":
		out, err = c.Drain(ctx, args[0], args[1])
		done = "drained"
	default:
		out, err = c.Undrain(ctx, args[0], args[1])
		done = "undrained"
	}
	if err != nil {
		return err
	}
	if g.output == "json" {
		return g.printJSON(out)
	}
	_, err = fmt.Fprintf(g.stdout, "%s %s in %s\n", done, args[1], args[0])
	return err
}
