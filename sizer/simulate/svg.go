package simulate

import (
	"fmt"
	"io"
	"math"

	"github.com/burst-hpc/burst/internal/svgchart"
)

var policyColors = map[string]string{
	PolicyStatic:        "#555555",
	PolicyIdleTimeout:   "#d95f02",
	PolicyBurst:         "#1b7fbf",
	PolicyBurstReserved: "#1b9e77",
}

// WriteSVG draws two stacked charts over the trace's days: cumulative cost
// per policy, and GPUs billed at each moment (internal/svgchart, no
// dependencies); title is put on top.
func WriteSVG(w io.Writer, r Result, title string) error {
	const (
		width  = 1000
		panelH = 330
		left   = 90
		right  = 190
		top    = 60
		gap    = 70
		plotW  = width - left - right
		height = top + 2*panelH + gap + 50
	)
	maxCost := 0.0
	for _, p := range r.Policies {
		for _, s := range p.Series {
			maxCost = math.Max(maxCost, s.CostUSD)
		}
		maxCost = math.Max(maxCost, p.CostUSD)
	}
	costScale, costUnit := 1.0, "USD"
	switch {
	case maxCost >= 2e6:
		costScale, costUnit = 1e6, "million USD"
	case maxCost >= 2e3:
		costScale, costUnit = 1e3, "thousand USD"
	}
	cost := svgchart.LinePanel{X: left, Y: top, Width: plotW, Height: panelH - 30, Title: "Cumulative cost (" + costUnit + ")",
		XLabel: "days since first submission", YMax: maxCost / costScale}
	gpus := svgchart.LinePanel{X: left, Y: top + panelH + gap, Width: plotW, Height: panelH - 30, Title: "GPUs billed",
		XLabel: "days since first submission"}
	for _, p := range r.Policies {
		col := policyColors[p.Name]
		if col == "" {
			col = "#000"
		}
		cs := svgchart.Series{Name: p.Name, Color: col}
		gs := svgchart.Series{Name: p.Name, Color: col}
		for _, s := range p.Series {
			d := s.At.Hours() / 24
			cs.Points = append(cs.Points, [2]float64{d, s.CostUSD / costScale})
			gs.Points = append(gs.Points, [2]float64{d, float64(s.GPUs)})
		}
		cost.Series = append(cost.Series, cs)
		cost.Legend = append(cost.Legend, fmt.Sprintf("%s %s", p.Name, svgchart.ShortMoney(p.CostUSD)))
		gpus.Series = append(gpus.Series, gs)
	}
	d := svgchart.New(width, height, title, left)
	d.Lines(cost)
	d.Lines(gpus)
	if _, err := io.WriteString(w, d.String()); err != nil {
		return fmt.Errorf("writing the svg: %w", err)
	}
	return nil
}
