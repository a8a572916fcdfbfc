package simulate

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

var policyColors = map[string]string{
	PolicyStatic:      "#555555",
	PolicyIdleTimeout: "#d95f02",
	PolicyBurst:       "#1b7fbf",
}

// WriteSVG draws two stacked charts over the trace's days: cumulative cost
// per policy, and GPUs billed at each moment. Hand-written SVG, no
// dependencies; title is put on top.
func WriteSVG(w io.Writer, r Result, title string) error {
	const (
		width   = 1000
		panelH  = 330
		left    = 90
		right   = 190
		top     = 60
		gap     = 70
		plotW   = width - left - right
		height  = top + 2*panelH + gap + 50
		fontCSS = "font-family:Helvetica,Arial,sans-serif"
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" style="%s">`+"\n", width, height, width, height, fontCSS)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="30" font-size="18" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))

	maxDays, maxCost, maxGPUs := 0.0, 0.0, 0.0
	for _, p := range r.Policies {
		for _, s := range p.Series {
			maxDays = math.Max(maxDays, s.At.Hours()/24)
			maxCost = math.Max(maxCost, s.CostUSD)
			maxGPUs = math.Max(maxGPUs, float64(s.GPUs))
		}
		maxCost = math.Max(maxCost, p.CostUSD)
	}
	if maxDays == 0 {
		maxDays = 1
	}
	costScale, costUnit := 1.0, "USD"
	switch {
	case maxCost >= 2e6:
		costScale, costUnit = 1e6, "million USD"
	case maxCost >= 2e3:
		costScale, costUnit = 1e3, "thousand USD"
	}
	panels := []struct {
		name  string
		max   float64
		value func(Sample) float64
		y0    int
	}{
		{"Cumulative cost (" + costUnit + ")", maxCost / costScale, func(s Sample) float64 { return s.CostUSD / costScale }, top},
		{"GPUs billed", maxGPUs, func(s Sample) float64 { return float64(s.GPUs) }, top + panelH + gap},
	}
	xTicks := niceTicks(maxDays)
	xMax := xTicks[len(xTicks)-1]
	for _, pn := range panels {
		yTicks := niceTicks(pn.max)
		yMax := yTicks[len(yTicks)-1]
		h := panelH - 30
		y0 := pn.y0 + 20
		px := func(d float64) float64 { return left + d/xMax*plotW }
		py := func(v float64) float64 { return float64(y0+h) - v/yMax*float64(h) }
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", left, pn.y0+10, html.EscapeString(pn.name))
		for _, t := range yTicks {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e3e3"/>`+"\n", left, py(t), left+plotW, py(t))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end">%s</text>`+"\n", left-8, py(t)+4, tickLabel(t))
		}
		for _, t := range xTicks {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e3e3e3"/>`+"\n", px(t), y0, px(t), y0+h)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", px(t), y0+h+16, tickLabel(t))
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", left, y0, plotW, h)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" text-anchor="middle">days since first submission</text>`+"\n", left+plotW/2, y0+h+34)
		for i, p := range r.Policies {
			col := policyColors[p.Name]
			if col == "" {
				col = "#000"
			}
			var pts strings.Builder
			for _, s := range p.Series {
				fmt.Fprintf(&pts, "%.1f,%.1f ", px(s.At.Hours()/24), py(pn.value(s)))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8" points="%s"/>`+"\n", col, strings.TrimSpace(pts.String()))
			ly := y0 + 20 + 22*i
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", left+plotW+15, ly, left+plotW+40, ly, col)
			label := p.Name
			if pn.y0 == top {
				label = fmt.Sprintf("%s %s", p.Name, shortMoney(p.CostUSD))
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", left+plotW+46, ly+4, html.EscapeString(label))
		}
	}
	b.WriteString("</svg>\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the svg: %w", err)
	}
	return nil
}

func shortMoney(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("$%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("$%.0fk", v/1e3)
	default:
		return fmt.Sprintf("$%.0f", v)
	}
}

// niceTicks returns 0 and round steps up to at least max.
func niceTicks(max float64) []float64 {
	if max <= 0 || math.IsNaN(max) {
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
	for v := 0.0; ; v += step {
		out = append(out, v)
		if v >= max-1e-9*max {
			break
		}
	}
	return out
}

func tickLabel(v float64) string {
	if v == math.Trunc(v) {
		if math.Abs(v) < 1000 {
			return fmt.Sprintf("%.0f", v)
		}
		return num(v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
