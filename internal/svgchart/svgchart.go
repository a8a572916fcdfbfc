// Package svgchart draws small, dependency-free SVG charts on the server:
// line panels (the simulator's cost curves), stacked bars (spend per day)
// and horizontal bars with a target mark (spend against a budget).
//
// Every text is XML-escaped. The output uses presentation attributes only
// (no style attributes, no scripts, nothing fetched), so it can be inlined
// in a page served with `Content-Security-Policy: default-src 'self'` or
// written to a file.
package svgchart

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Font is the font stack of every chart (system fonts only: nothing is
// downloaded).
const Font = "Helvetica,Arial,sans-serif"

// Palette gives series colours in order (colour-blind safe, from ColorBrewer's Dark2 and Set1).
var Palette = []string{"#1b7fbf", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#555555"}

// Color is the i-th palette colour (wrapping).
func Color(i int) string { return Palette[((i%len(Palette))+len(Palette))%len(Palette)] }

// Doc is an SVG document being drawn.
type Doc struct {
	b             strings.Builder
	width, height int
}

// New starts a width x height document with a white background and, when
// title is not empty, a bold title at the top left (x = left).
func New(width, height int, title string, left int) *Doc {
	d := &Doc{width: width, height: height}
	fmt.Fprintf(&d.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" role="img">`+"\n", width, height, width, height, Font)
	fmt.Fprintf(&d.b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	if title != "" {
		fmt.Fprintf(&d.b, `<title>%s</title>`+"\n", Esc(title))
		fmt.Fprintf(&d.b, `<text x="%d" y="30" font-size="18" font-weight="bold">%s</text>`+"\n", left, Esc(title))
	}
	return d
}

// String closes the document and returns it.
func (d *Doc) String() string { return d.b.String() + "</svg>\n" }

// Esc escapes s for SVG/XML text and attribute values.
func Esc(s string) string { return html.EscapeString(s) }

// Series is one line: points (x, y), a name for the legend.
type Series struct {
	Name   string
	Color  string // "" takes the palette colour of its index
	Points [][2]float64
}

// LinePanel is one line chart: a plot area with grid, ticks and a legend
// to its right.
type LinePanel struct {
	X, Y          int // top left of the panel (its title line)
	Width, Height int // plot area
	Title, XLabel string
	// XMax and YMax bound the axes (0: from the data, rounded up to a tick).
	XMax, YMax float64
	Series     []Series
	// Legend overrides the legend labels (same order as Series; "" keeps the name).
	Legend []string
}

// Lines draws a line panel.
func (d *Doc) Lines(p LinePanel) {
	xm, ym := p.XMax, p.YMax
	for _, s := range p.Series {
		for _, pt := range s.Points {
			if p.XMax == 0 {
				xm = math.Max(xm, pt[0])
			}
			if p.YMax == 0 {
				ym = math.Max(ym, pt[1])
			}
		}
	}
	if xm <= 0 {
		xm = 1
	}
	xTicks, yTicks := NiceTicks(xm), NiceTicks(ym)
	xMax, yMax := xTicks[len(xTicks)-1], yTicks[len(yTicks)-1]
	h := p.Height
	y0 := p.Y + 20
	left := float64(p.X)
	px := func(v float64) float64 { return left + v/xMax*float64(p.Width) }
	py := func(v float64) float64 { return float64(y0+h) - v/yMax*float64(h) }
	fmt.Fprintf(&d.b, `<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", p.X, p.Y+10, Esc(p.Title))
	for _, t := range yTicks {
		fmt.Fprintf(&d.b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e3e3"/>`+"\n", p.X, py(t), p.X+p.Width, py(t))
		fmt.Fprintf(&d.b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end">%s</text>`+"\n", p.X-8, py(t)+4, TickLabel(t))
	}
	for _, t := range xTicks {
		fmt.Fprintf(&d.b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e3e3e3"/>`+"\n", px(t), y0, px(t), y0+h)
		fmt.Fprintf(&d.b, `<text x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", px(t), y0+h+16, TickLabel(t))
	}
	fmt.Fprintf(&d.b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", p.X, y0, p.Width, h)
	if p.XLabel != "" {
		fmt.Fprintf(&d.b, `<text x="%d" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", p.X+p.Width/2, y0+h+34, Esc(p.XLabel))
	}
	for i, s := range p.Series {
		col := s.Color
		if col == "" {
			col = Color(i)
		}
		var pts strings.Builder
		for _, pt := range s.Points {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(pt[0]), py(pt[1]))
		}
		fmt.Fprintf(&d.b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", Esc(col), strings.TrimSpace(pts.String()))
		ly := y0 + 20 + 22*i
		fmt.Fprintf(&d.b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", p.X+p.Width+15, ly, p.X+p.Width+40, ly, Esc(col))
		label := s.Name
		if i < len(p.Legend) && p.Legend[i] != "" {
			label = p.Legend[i]
		}
		fmt.Fprintf(&d.b, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", p.X+p.Width+46, ly+4, Esc(label))
	}
}

// Stack is one stacked-bar series: a value per category.
type Stack struct {
	Name   string
	Color  string
	Values []float64 // one per category
}

// BarPanel is a stacked bar chart over categories (days, say).
type BarPanel struct {
	X, Y          int
	Width, Height int
	Title         string
	Categories    []string // x labels; only every LabelEvery-th is written (0: as many as fit)
	LabelEvery    int
	Stacks        []Stack
	YUnit         string // prefix of y tick labels, e.g. "$"
}

// Bars draws a stacked bar panel with a legend below it.
func (d *Doc) Bars(p BarPanel) {
	n := len(p.Categories)
	tot := make([]float64, n)
	for _, s := range p.Stacks {
		for i := 0; i < n && i < len(s.Values); i++ {
			tot[i] += math.Max(s.Values[i], 0)
		}
	}
	ym := 0.0
	for _, v := range tot {
		ym = math.Max(ym, v)
	}
	yTicks := NiceTicks(ym)
	yMax := yTicks[len(yTicks)-1]
	y0 := p.Y + 20
	h := float64(p.Height)
	py := func(v float64) float64 { return float64(y0) + h - v/yMax*h }
	fmt.Fprintf(&d.b, `<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", p.X, p.Y+10, Esc(p.Title))
	for _, t := range yTicks {
		fmt.Fprintf(&d.b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e3e3"/>`+"\n", p.X, py(t), p.X+p.Width, py(t))
		fmt.Fprintf(&d.b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end">%s%s</text>`+"\n", p.X-6, py(t)+4, Esc(p.YUnit), TickLabel(t))
	}
	if n > 0 {
		slot := float64(p.Width) / float64(n)
		bw := math.Max(slot*0.7, 1)
		every := p.LabelEvery
		if every <= 0 {
			every = max(1, int(math.Ceil(float64(n)*40/float64(p.Width))))
		}
		for i := 0; i < n; i++ {
			x := float64(p.X) + slot*float64(i) + (slot-bw)/2
			base := 0.0
			for si, s := range p.Stacks {
				if i >= len(s.Values) || s.Values[i] <= 0 {
					continue
				}
				col := s.Color
				if col == "" {
					col = Color(si)
				}
				top := base + s.Values[i]
				fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s%s</title></rect>`+"\n",
					x, py(top), bw, py(base)-py(top), Esc(col), Esc(p.Categories[i]), Esc(s.Name), Esc(p.YUnit), trim(s.Values[i]))
				base = top
			}
			if i%every == 0 {
				fmt.Fprintf(&d.b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", x+bw/2, float64(y0)+h+14, Esc(p.Categories[i]))
			}
		}
	}
	fmt.Fprintf(&d.b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#888"/>`+"\n", p.X, float64(y0)+h, p.X+p.Width, float64(y0)+h)
	lx := float64(p.X)
	for si, s := range p.Stacks {
		col := s.Color
		if col == "" {
			col = Color(si)
		}
		ly := float64(y0) + h + 32
		fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`+"\n", lx, ly-10, Esc(col))
		fmt.Fprintf(&d.b, `<text x="%.1f" y="%.1f" font-size="12">%s</text>`+"\n", lx+16, ly, Esc(s.Name))
		lx += 28 + 7*float64(len([]rune(s.Name)))
	}
}

// HBar is one row of a horizontal bar chart: a value, an optional lighter
// extension to Ahead (a forecast) and an optional Mark (a cap).
type HBar struct {
	Label string
	Value float64
	Ahead float64 // 0: none; drawn from Value to Ahead when larger
	Mark  float64 // 0: none
	Note  string  // written right of the bar
}

// HBarPanel is a horizontal bar chart, one row per HBar.
type HBarPanel struct {
	X, Y       int // top left; labels are written left of X
	Width      int // bar area
	Row        int // row height (default 26)
	Title      string
	Bars       []HBar
	Color      string
	AheadColor string
	MarkColor  string
	Unit       string // prefix of the axis labels
}

// HBars draws a horizontal bar panel; the height it uses is 40 + Row*len(Bars).
func (d *Doc) HBars(p HBarPanel) {
	if p.Row <= 0 {
		p.Row = 26
	}
	if p.Color == "" {
		p.Color = Palette[0]
	}
	if p.AheadColor == "" {
		p.AheadColor = "#a6cde8"
	}
	if p.MarkColor == "" {
		p.MarkColor = "#c0392b"
	}
	xm := 0.0
	for _, b := range p.Bars {
		xm = math.Max(xm, math.Max(b.Value, math.Max(b.Ahead, b.Mark)))
	}
	ticks := NiceTicks(xm)
	xMax := ticks[len(ticks)-1]
	px := func(v float64) float64 { return float64(p.X) + v/xMax*float64(p.Width) }
	if p.Title != "" {
		fmt.Fprintf(&d.b, `<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", p.X, p.Y+10, Esc(p.Title))
	}
	top := p.Y + 20
	bottom := top + p.Row*len(p.Bars)
	for _, t := range ticks {
		fmt.Fprintf(&d.b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e3e3e3"/>`+"\n", px(t), top, px(t), bottom)
		fmt.Fprintf(&d.b, `<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%s%s</text>`+"\n", px(t), bottom+14, Esc(p.Unit), TickLabel(t))
	}
	for i, b := range p.Bars {
		y := float64(top + p.Row*i)
		bh := float64(p.Row) * 0.6
		by := y + (float64(p.Row)-bh)/2
		fmt.Fprintf(&d.b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end">%s</text>`+"\n", p.X-8, by+bh-3, Esc(b.Label))
		if b.Ahead > b.Value {
			fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", px(0), by, px(b.Ahead)-px(0), bh, Esc(p.AheadColor))
		}
		if b.Value > 0 {
			fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", px(0), by, math.Max(px(b.Value)-px(0), 1), bh, Esc(p.Color))
		}
		if b.Mark > 0 {
			fmt.Fprintf(&d.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", px(b.Mark), y+1, px(b.Mark), y+float64(p.Row)-1, Esc(p.MarkColor))
		}
		if b.Note != "" {
			fmt.Fprintf(&d.b, `<text x="%d" y="%.1f" font-size="11">%s</text>`+"\n", p.X+p.Width+8, by+bh-3, Esc(b.Note))
		}
	}
}

// NiceTicks returns 0 and round steps up to at least max.
func NiceTicks(max float64) []float64 {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return []float64{0, 1}
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for i := 0; ; i++ {
		v := float64(i) * step
		out = append(out, v)
		if v >= max-1e-9*max {
			break
		}
	}
	return out
}

// TickLabel writes a tick value: integers with thousands separators, others
// with at most two decimals (more for values below 0.01).
func TickLabel(v float64) string {
	if v == math.Trunc(v) {
		if math.Abs(v) < 1000 {
			return fmt.Sprintf("%.0f", v)
		}
		return Thousands(v)
	}
	return trim(v) // up to 4 decimals: 0.015 stays 0.015
}

func trim(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", v), "0"), ".")
}

// Thousands writes v rounded to an integer with comma separators.
func Thousands(v float64) string {
	s := fmt.Sprintf("%.0f", math.Abs(v))
	var b strings.Builder
	if v < 0 && s != "0" {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// ShortMoney writes a dollar amount briefly: $1.23M, $45k, $7.
func ShortMoney(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("$%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("$%.0fk", v/1e3)
	default:
		return fmt.Sprintf("$%.0f", v)
	}
}
