package ui

import (
	"fmt"
	"html/template"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/svgchart"
)

// The charts are drawn here as inline SVG by internal/svgchart, which
// escapes every text; template.HTML marks that output as safe.

const chartW = 900

// fleetChart: each class's live price per hour.
func fleetChart(v sizerapi.FleetView) template.HTML {
	if len(v.Classes) == 0 {
		return ""
	}
	p := svgchart.HBarPanel{X: 110, Y: 10, Width: 600, Title: "Live instances, $/h per class", Unit: "$"}
	for _, c := range v.Classes {
		p.Bars = append(p.Bars, svgchart.HBar{Label: c.Class, Value: c.HourlyUSD, Note: fmt.Sprintf("%d instance%s, %s/h", c.Instances, plural(c.Instances), usd(c.HourlyUSD))})
	}
	return hbarChart(p, 70, 26, 0)
}

// jobsChart: GPUs used within GPUs requested, for the newest reported jobs.
func jobsChart(v sizerapi.JobsView) template.HTML {
	p := svgchart.HBarPanel{X: 160, Y: 10, Width: 520, Title: "GPUs per node: used (dark) of requested (light), newest reported jobs", Row: 20}
	for _, j := range v.Jobs {
		if !j.Reported {
			continue
		}
		p.Bars = append(p.Bars, svgchart.HBar{Label: "job " + j.JobID + " " + short(j.JobName, 14), Value: float64(j.GPUsUsed), Ahead: float64(j.GPUsPerNode),
			Note: fmt.Sprintf("%d of %d GPUs, %.1f of %.1f GiB", j.GPUsUsed, j.GPUsPerNode, j.GPUMemUsedGiB, j.GPUMemReqGiB)})
	}
	return hbarChart(p, 60, 20, 15)
}

// budgetChart: spend (dark), forecast to month end (light) and the cap (red).
func budgetChart(v sizerapi.MoneyView) template.HTML {
	if len(v.Accounts) == 0 {
		return ""
	}
	p := svgchart.HBarPanel{X: 130, Y: 10, Width: 560, Title: "Spend this month (dark), forecast to month end (light), budget (red)", Unit: "$"}
	for _, a := range v.Accounts {
		note := usd(a.SpentUSD)
		if a.BudgetUSD > 0 {
			note += " of " + usd(a.BudgetUSD)
		}
		p.Bars = append(p.Bars, svgchart.HBar{Label: short(a.Account, 18), Value: a.SpentUSD, Ahead: a.ForecastUSD, Mark: a.BudgetUSD, Note: note})
	}
	return hbarChart(p, 70, 26, 0)
}

// dayChart: spend per UTC day, stacked by account.
func dayChart(v sizerapi.MoneyView) template.HTML {
	if len(v.Days) == 0 {
		return ""
	}
	accounts := map[string]float64{}
	for _, d := range v.Days {
		for a, c := range d.ByAccount {
			accounts[a] += c
		}
	}
	p := svgchart.BarPanel{X: 70, Y: 10, Width: 780, Height: 170, Title: "Spend per day (UTC), by account", YUnit: "$"}
	for _, d := range v.Days {
		p.Categories = append(p.Categories, d.Day[5:])
	}
	for _, a := range sortedKeys(accounts) {
		st := svgchart.Stack{Name: a}
		for _, d := range v.Days {
			st.Values = append(st.Values, d.ByAccount[a])
		}
		p.Stacks = append(p.Stacks, st)
	}
	d := svgchart.New(chartW, 250, "", 0)
	d.Bars(p)
	return template.HTML(d.String())
}

// userChart: the 15 users who spent most.
func userChart(v sizerapi.MoneyView) template.HTML {
	p := svgchart.HBarPanel{X: 200, Y: 10, Width: 500, Title: "Spend this month per user", Unit: "$", Row: 20}
	for _, u := range v.Users {
		p.Bars = append(p.Bars, svgchart.HBar{Label: short(u.Account, 12) + " / " + short(u.User, 12), Value: u.SpentUSD, Note: usd(u.SpentUSD)})
	}
	return hbarChart(p, 60, 20, 15)
}

// savingsChart: what each recurring job would save a month.
func savingsChart(v sizerapi.RightSizingView) template.HTML {
	p := svgchart.HBarPanel{X: 240, Y: 10, Width: 460, Title: "Saving per month if right-sized", Unit: "$", Row: 22, Color: "#1b9e77"}
	for _, it := range v.Items {
		p.Bars = append(p.Bars, svgchart.HBar{Label: short(it.User, 12) + " / " + short(it.JobName, 16), Value: it.SaveUSDPerMonth, Note: usd(it.SaveUSDPerMonth)})
	}
	return hbarChart(p, 60, 22, 15)
}

// hbarChart draws a panel of horizontal bars, at most most of them (0: all),
// top pixels plus row a bar high; none: no chart.
func hbarChart(p svgchart.HBarPanel, top, row, most int) template.HTML {
	if most > 0 && len(p.Bars) > most {
		p.Bars = p.Bars[:most]
	}
	if len(p.Bars) == 0 {
		return ""
	}
	d := svgchart.New(chartW, top+row*len(p.Bars), "", 0)
	d.HBars(p)
	return template.HTML(d.String())
}

func short(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
