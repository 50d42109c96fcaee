// Package report writes what the simulator measured: tables as aligned
// text, CSV or Markdown, and line charts as SVG. Every output is a pure
// function of its input, so that the same run gives the same bytes and a
// regenerated document differs only where a figure did.
package report

import (
	"fmt"
	"math"
	"strings"
)

// Table is a header and rows of cells.
type Table struct {
	Header []string
	Rows   [][]string
}

// Text is t as aligned columns: the first two left-aligned, the others
// (figures) right-aligned.
func (t Table) Text() string {
	all := append([][]string{t.Header}, t.Rows...)
	width := make([]int, len(t.Header))
	for _, r := range all {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], len(c))
			}
		}
	}
	var b strings.Builder
	for _, r := range all {
		var line strings.Builder
		for i, c := range r {
			if i >= len(width) {
				break
			}
			if i > 0 {
				line.WriteString("  ")
			}
			if i < 2 {
				fmt.Fprintf(&line, "%-*s", width[i], c)
			} else {
				fmt.Fprintf(&line, "%*s", width[i], c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	return b.String()
}

// CSV is t as comma-separated values (the cells hold no commas).
func (t Table) CSV() string {
	var b strings.Builder
	for _, r := range append([][]string{t.Header}, t.Rows...) {
		b.WriteString(strings.Join(r, ",") + "\n")
	}
	return b.String()
}

// Markdown is t as a Markdown table.
func (t Table) Markdown() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.Header, " | ") + " |\n|")
	for range t.Header {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// Series is one line of a chart: a Y for each of the chart's X.
type Series struct {
	Name string
	Y    []float64
}

// LineChart is a chart of lines over shared X values.
type LineChart struct {
	Title, XLabel, YLabel string
	X                     []float64
	Series                []Series
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 720, 420
	left, right    = 70, 170 // margins: the Y axis' labels, the legend
	top, bottom    = 40, 50
)

// palette colours the series in turn.
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// SVG draws c: axes from 0 to a round maximum, the X values as ticks,
// one polyline and legend entry per series.
func (c LineChart) SVG() []byte {
	ymax := 0.0
	for _, s := range c.Series {
		for _, y := range s.Y {
			ymax = max(ymax, y)
		}
	}
	ymax = niceCeil(ymax)
	xmin, xmax := 0.0, 1.0
	if len(c.X) > 0 {
		xmin, xmax = c.X[0], c.X[len(c.X)-1]
	}
	px := func(x float64) float64 {
		if xmax == xmin {
			return left
		}
		return left + (x-xmin)/(xmax-xmin)*(chartW-left-right)
	}
	py := func(y float64) float64 { return chartH - bottom - y/ymax*(chartH-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15">%s</text>`+"\n", left, escape(c.Title))
	c.axes(&b, px, py, ymax)
	for k, s := range c.Series {
		colour := palette[k%len(palette)]
		var pts []string
		for i, y := range s.Y {
			if i < len(c.X) && !math.IsNaN(y) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(c.X[i]), py(y)))
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", colour, strings.Join(pts, " "))
		ly := top + 18*k
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text>`+"\n",
			chartW-right+15, ly, chartW-right+35, ly, colour, chartW-right+40, ly+4, escape(s.Name))
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// axes draws the axes, their labels and ticks into b.
func (c LineChart) axes(b *strings.Builder, px, py func(float64) float64, ymax float64) {
	x0, y0 := float64(left), float64(chartH-bottom)
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%d" y2="%.0f" stroke="black"/>`+"\n", x0, y0, chartW-right, y0)
	fmt.Fprintf(b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%d" stroke="black"/>`+"\n", x0, y0, x0, top)
	for _, x := range c.X {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", px(x), y0+16, trim(x))
	}
	for k := range 5 {
		y := ymax * float64(k+1) / 5
		fmt.Fprintf(b, `<line x1="%.0f" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			x0, py(y), chartW-right, py(y), x0-6, py(y)+4, trim(y))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", (x0+chartW-right)/2, chartH-12, escape(c.XLabel))
	fmt.Fprintf(b, `<text x="16" y="%.0f" text-anchor="middle" transform="rotate(-90 16 %.0f)">%s</text>`+"\n",
		(y0+top)/2, (y0+top)/2, escape(c.YLabel))
}

// niceCeil rounds x up to 1, 2, 2.5 or 5 times a power of ten (1 for x ≤ 0).
func niceCeil(x float64) float64 {
	if !(x > 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// trim formats x without needless digits.
func trim(x float64) string { return fmt.Sprintf("%.6g", x) }

// escape makes s safe in SVG text.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
