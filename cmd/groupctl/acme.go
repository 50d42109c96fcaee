package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/transmirror/transmirror/probe/api"
)

// acme runs "acme list", "acme publish GROUP MEMBER NAME VALUE" and
// "acme remove GROUP MEMBER NAME VALUE" (signed, as the member).
func (g *global) acme(ctx context.Context, args []string) error {
	const use = "usage: groupctl acme list | acme publish|remove GROUP MEMBER NAME VALUE"
	if len(args) == 0 {
		return usageError{use}
	}
	switch args[0] {
	case "list":
		if len(args) != 1 {
			return usageError{use}
		}
		return g.acmeList(ctx)
	case "publish", "remove":
		if len(args) != 5 {
			return usageError{use}
		}
	default:
		return usageError{use}
	}
	c, err := g.client(true)
	if err != nil {
		return err
	}
	ch := api.ACMEChallenge{Name: args[3], Value: args[4]}
	if args[0] == "remove" {
		r, err := c.RemoveChallenge(ctx, args[1], args[2], ch)
		if err != nil {
			return err
		}
		if g.output == "json" {
			return g.printJSON(r)
		}
		_, err = fmt.Fprintf(g.stdout, "removed: %t\n", r.Removed)
		return err
	}
	out, err := c.PublishChallenge(ctx, args[1], args[2], ch)
	if err != nil {
		return err
	}
	if g.output == "json" {
		return g.printJSON(out)
	}
	_, err = fmt.Fprintf(g.stdout, "_acme-challenge.%s TXT %q until %s\n", out.Name, out.Value, out.Expires.UTC().Format(time.RFC3339))
	return err
}

// acmeList prints the live ACME challenges.
func (g *global) acmeList(ctx context.Context) error {
	c, err := g.client(false)
	if err != nil {
		return err
	}
	l, err := c.Challenges(ctx)
	if err != nil {
		return err
	}
	if g.output == "json" {
		return g.printJSON(l)
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGROUP\tMEMBER\tVALUE\tEXPIRES")
	for _, ch := range l.Challenges {
		fmt.Fprintf(tw, "_acme-challenge.%s\t%s\t%s\t%s\t%s\n", ch.Name, ch.Group, ch.Member, ch.Value, ch.Expires.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}
