package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/transmirror/transmirror/probe/api"
)

// where prints which members of a group hold a file (api.GroupWhere): a
// table of the holders, then the members that lack it and those whose
// index dnsd does not know; -json (or -o json) prints dnsd's answer.
func (g *global) where(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("where", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print dnsd's JSON answer")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError{"usage: groupctl where GROUP PATH [-json]"}
	}
	c, err := g.client(false)
	if err != nil {
		return err
	}
	wh, err := c.Where(ctx, pos[0], pos[1])
	if err != nil {
		return err
	}
	if *asJSON || g.output == "json" {
		return g.printJSON(wh)
	}
	return printWhere(g.stdout, wh)
}

// printWhere writes wh as a table, one holder a line.
func printWhere(w io.Writer, wh api.Where) error {
	fmt.Fprintf(w, "group %s: %s on %d members\n", wh.Group, wh.Path, len(wh.Holders))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTATE\tSIZE\tMTIME\tBEST\tGENERATION\tLAG")
	for _, h := range wh.Holders {
		best := "no"
		if h.Best {
			best = "yes"
		}
		gen, lag := generation(api.MemberView{Generation: h.Generation, Lag: h.Lag})
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", h.Name, h.State, h.Size, h.ModTime.UTC().Format(time.RFC3339), best, gen, lag)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range []struct {
		what  string
		names []string
	}{{"lacking", wh.Lacking}, {"index unknown", wh.Unknown}} {
		if len(l.names) > 0 {
			fmt.Fprintf(w, "%s: %s\n", l.what, strings.Join(l.names, ", "))
		}
	}
	return nil
}
