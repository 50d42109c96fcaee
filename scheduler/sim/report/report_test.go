package report

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
)

var table = Table{Header: []string{"backends", "policy", "req/s"}, Rows: [][]string{{"4", "wrr", "301.6"}, {"16", "lard", "2173.8"}}}

// TestTable: the three forms of one table.
func TestTable(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"text", table.Text(), "backends  policy   req/s\n4         wrr      301.6\n16        lard    2173.8\n"},
		{"csv", table.CSV(), "backends,policy,req/s\n4,wrr,301.6\n16,lard,2173.8\n"},
		{"markdown", table.Markdown(), "| backends | policy | req/s |\n|---|---|---|\n| 4 | wrr | 301.6 |\n| 16 | lard | 2173.8 |\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", tt.got, tt.want)
			}
		})
	}
}

// TestSVG: a chart is well-formed XML, one polyline per series through
// each of its points, a legend entry per series, text escaped, and the
// same chart gives the same bytes.
func TestSVG(t *testing.T) {
	c := LineChart{Title: "throughput <req/s>", XLabel: "back ends", YLabel: "req/s", X: []float64{1, 2, 4, 8, 16},
		Series: []Series{{"wrr", []float64{79, 160, 301, 600, 904}}, {"lard & co", []float64{79, 300, 791, 1500, 2173}}}}
	svg := c.SVG()
	if !bytes.Equal(svg, c.SVG()) {
		t.Fatal("two renderings differ")
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	lines, points := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed: %v\n%s", err, svg)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
			for _, a := range se.Attr {
				if a.Name.Local == "points" {
					points += len(strings.Fields(a.Value))
				}
			}
		}
	}
	if lines != 2 || points != 10 {
		t.Errorf("%d polylines of %d points in all, want 2 of 5 each", lines, points)
	}
	for _, want := range []string{"throughput &lt;req/s&gt;", ">lard &amp; co<", ">wrr<", ">2500<"} { // the Y axis ends at 2500: 2173 rounded up
		if !strings.Contains(string(svg), want) {
			t.Errorf("no %q in\n%s", want, svg)
		}
	}
}

// TestNiceCeil: the Y axis ends at 1, 2, 2.5 or 5 times a power of ten.
func TestNiceCeil(t *testing.T) {
	for x, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.2: 2, 3: 5, 7: 10, 2173: 2500, 904: 1000, 3000: 5000} {
		if got := niceCeil(x); got != want {
			t.Errorf("niceCeil(%g) = %g, want %g", x, got, want)
		}
	}
}
