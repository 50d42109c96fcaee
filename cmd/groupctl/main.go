// Command groupctl is the operator's tool for transmirror's mirror groups:
// it talks to dnsd's admin API.
//
// Usage:
//
//	groupctl [-server URL] [-o table|json] explain GROUP -client IP [-ecs PREFIX] [-type A|AAAA]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage: groupctl [-server URL] [-o table|json] COMMAND ...

commands:
  explain GROUP -client IP [-ecs PREFIX] [-type A|AAAA]
        why dnsd answers GROUP the way it does for this client
`

// global holds the flags that come before the command.
type global struct {
	server string
	output string
	client *http.Client
	stdout io.Writer
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("groupctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	g := &global{stdout: stdout, client: &http.Client{Timeout: 10 * time.Second}}
	def := os.Getenv("TRANSMIRROR_ADMIN")
	if def == "" {
		def = "http://127.0.0.1:8053"
	}
	fs.StringVar(&g.server, "server", def, "dnsd admin URL (or $TRANSMIRROR_ADMIN)")
	fs.StringVar(&g.output, "o", "table", "output: table or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if g.output != "table" && g.output != "json" {
		fmt.Fprintf(stderr, "groupctl: -o %q: want table or json\n", g.output)
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd, rest := fs.Arg(0), fs.Args()[1:]; cmd {
	case "explain":
		err = g.explain(ctx, rest, stderr)
	default:
		fmt.Fprintf(stderr, "groupctl: unknown command %q\n", cmd)
		fs.Usage()
		return 2
	}
	var ue usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "groupctl:", err)
		return 2
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

// apiError is the JSON error body of the admin API.
type apiError struct {
	Error string `json:"error"`
}

// get fetches path from the admin API and decodes the JSON body into v.
func (g *global) get(ctx context.Context, path string, v any) error {
	u := strings.TrimRight(g.server, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var ae apiError
		if json.Unmarshal(body, &ae) == nil && ae.Error != "" {
			return fmt.Errorf("%s: %s", resp.Status, ae.Error)
		}
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s: %w", u, err)
	}
	return nil
}

// explanation mirrors dnsd.Explanation (the admin API's JSON).
type explanation struct {
	Group        string `json:"group"`
	Policy       string `json:"policy"`
	Qtype        string `json:"qtype"`
	Client       string `json:"client"`
	ECS          string `json:"ecs"`
	ClientPrefix string `json:"client_prefix"`
	Location     struct {
		Lat       *float64 `json:"lat"`
		Lon       *float64 `json:"lon"`
		Country   string   `json:"country"`
		Continent string   `json:"continent"`
	} `json:"location"`
	Source    string   `json:"source"`
	ECSUse    string   `json:"ecs_use"`
	Scope     int      `json:"scope"`
	TTL       uint32   `json:"ttl"`
	FailOpen  bool     `json:"fail_open"`
	Answer    []string `json:"answer"`
	Addresses []string `json:"addresses"`
	Why       string   `json:"why"`
	Members   []struct {
		Name        string  `json:"name"`
		State       string  `json:"state"`
		DistanceKm  float64 `json:"distance_km"`
		Load        float64 `json:"load"`
		Pending     float64 `json:"pending"`
		Capacity    float64 `json:"capacity"`
		Weight      float64 `json:"weight"`
		Utilization float64 `json:"utilization"`
		Picked      bool    `json:"picked"`
		Note        string  `json:"note"`
	} `json:"members"`
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
	q := url.Values{"client": {*client}, "qtype": {*qtype}}
	if *ecs != "" {
		q.Set("ecs", *ecs)
	}
	var raw json.RawMessage
	if err := g.get(ctx, "/v1/groups/"+url.PathEscape(pos[0])+"/explain?"+q.Encode(), &raw); err != nil {
		return err
	}
	if g.output == "json" {
		_, err := fmt.Fprintf(g.stdout, "%s\n", raw)
		return err
	}
	var e explanation
	if err := json.Unmarshal(raw, &e); err != nil {
		return err
	}
	return printExplanation(g.stdout, &e)
}

func printExplanation(w io.Writer, e *explanation) error {
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
	fmt.Fprintf(w, "why:     %s\n\n", e.Why)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTATE\tDISTANCE\tUTIL\tLOAD\tPENDING\tCAPACITY\tWEIGHT\tPICKED\tNOTE")
	for _, m := range e.Members {
		picked := ""
		if m.Picked {
			picked = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f km\t%.2f\t%g\t%g\t%g\t%g\t%s\t%s\n",
			m.Name, m.State, m.DistanceKm, m.Utilization, m.Load, m.Pending, m.Capacity, m.Weight, picked, m.Note)
	}
	return tw.Flush()
}
