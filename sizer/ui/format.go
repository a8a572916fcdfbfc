package ui

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/svgchart"
)

// funcs are the templates' formatters. Figures are written without units
// inside their data-k element (but for $ and %), so the text parses back
// to the API's number.
var funcs = template.FuncMap{
	"usd":    usd,
	"pct":    func(v float64) string { return fmt.Sprintf("%.1f%%", v) },
	"f1":     func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":     func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"iso":    func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"hm":     hm,
	"ago":    ago,
	"dur":    dur,
	"since":  func(a, b time.Time) string { return dur(b.Sub(a)) },
	"q":      url.QueryEscape,
	"mul100": func(v float64) float64 { return 100 * v },
	"yesno":  func(b bool) string { return map[bool]string{true: "yes", false: "no"}[b] },
	"zero":   func(t time.Time) bool { return t.IsZero() },
	"deref": func(t *time.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return *t
	},
}

// usd writes dollars: 4 decimals below $1 (the demo's cents matter), 2
// above, thousands separated.
func usd(v float64) string {
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	if v < 1 {
		return fmt.Sprintf("%s$%.4f", sign, v)
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	whole, cents, _ := strings.Cut(s, ".")
	n, _ := strconv.ParseFloat(whole, 64)
	return sign + "$" + svgchart.Thousands(n) + "." + cents
}

func hm(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return dur(now.Sub(t)) + " ago"
}

func dur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%.0fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%.1fd", d.Hours()/24)
}
