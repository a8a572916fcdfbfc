package svgchart

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func wellFormed(t *testing.T, s string) map[string]int {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	n := map[string]int{}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, s)
		}
		if se, ok := tok.(xml.StartElement); ok {
			n[se.Name.Local]++
			for _, a := range se.Attr {
				if a.Name.Local == "style" || strings.HasPrefix(a.Name.Local, "on") {
					t.Errorf("<%s> has attribute %s (blocked by a strict CSP, or script)", se.Name.Local, a.Name.Local)
				}
			}
		}
	}
}

func TestChartsEscapeAndAreWellFormed(t *testing.T) {
	evil := `<script>alert(1)</script>"&'`
	d := New(800, 600, evil, 80)
	d.Lines(LinePanel{X: 80, Y: 50, Width: 500, Height: 150, Title: evil, XLabel: evil,
		Series: []Series{{Name: evil, Points: [][2]float64{{0, 0}, {1, 2}, {2, 5}}}, {Name: "b", Points: [][2]float64{{0, 1}}}}})
	d.Bars(BarPanel{X: 80, Y: 250, Width: 500, Height: 120, Title: "per day", Categories: []string{evil, "b", "c"}, YUnit: "$",
		Stacks: []Stack{{Name: evil, Values: []float64{1, 0, 2}}, {Name: "y", Values: []float64{0.5, 1, -1}}}})
	d.HBars(HBarPanel{X: 120, Y: 420, Width: 400, Title: evil, Unit: "$",
		Bars: []HBar{{Label: evil, Value: 3, Ahead: 5, Mark: 4, Note: evil}, {Label: "z", Value: 0}}})
	out := d.String()
	n := wellFormed(t, out)
	if strings.Contains(out, "<script") {
		t.Fatal("unescaped <script> in the chart")
	}
	if n["polyline"] != 2 {
		t.Errorf("%d polylines, want 2", n["polyline"])
	}
	// bars: 2 + 1 (values > 0), legend swatches 2, HBars: ahead 1 + value 1, background 1
	if n["rect"] != 1+3+2+2+2 {
		t.Errorf("%d rects, want 10", n["rect"])
	}
}

func TestEmptyChartsDraw(t *testing.T) {
	d := New(300, 300, "", 50)
	d.Lines(LinePanel{X: 50, Y: 10, Width: 100, Height: 50})
	d.Bars(BarPanel{X: 50, Y: 100, Width: 100, Height: 50})
	d.HBars(HBarPanel{X: 50, Y: 200, Width: 100})
	wellFormed(t, d.String())
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		max  float64
		last float64
		n    int
	}{{4.04, 5, 6}, {1, 1, 6}, {0, 1, 2}, {0.0123, 0.0125, 6}, {12345, 12500, 6}} {
		got := NiceTicks(c.max)
		if got[0] != 0 || got[len(got)-1] < c.max || len(got) != c.n || got[len(got)-1]-c.last > 1e-9*c.last+1e-12 {
			t.Errorf("NiceTicks(%g) = %v, want %d ticks up to %g", c.max, got, c.n, c.last)
		}
	}
}

func TestLabels(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0"}, {5, "5"}, {2500, "2,500"}, {-1234567, "-1,234,567"}, {0.25, "0.25"}, {0.004, "0.004"}} {
		if got := TickLabel(c.v); got != c.want {
			t.Errorf("TickLabel(%g) = %q, want %q", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		v    float64
		want string
	}{{3, "$3"}, {4500, "$4k"}, {1.5e6, "$1.50M"}} {
		if got := ShortMoney(c.v); got != c.want {
			t.Errorf("ShortMoney(%g) = %q, want %q", c.v, got, c.want)
		}
	}
}
