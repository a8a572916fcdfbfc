// Package budget computes per-account spend from instance launch and
// termination times and hourly prices, and compares it with monthly caps.
// It is pure: callers pass the instances and the current time.
package budget

import (
	"sort"
	"time"
)

// Interval is one instance's life and price.
type Interval struct {
	InstanceID string
	Account    string
	User       string
	JobID      string
	PriceUSD   float64   // per hour
	Start      time.Time // launch
	End        time.Time // termination; zero while running
}

// Cost is the interval's cost within [from, to): (overlap hours) x price. A
// running instance (zero End) is charged up to `to`.
func (iv Interval) Cost(from, to time.Time) float64 {
	s, e := iv.Start, iv.End
	if e.IsZero() || e.After(to) {
		e = to
	}
	if s.Before(from) {
		s = from
	}
	if !e.After(s) {
		return 0
	}
	return e.Sub(s).Hours() * iv.PriceUSD
}

// MonthStart is the first instant of t's month in UTC: budgets are monthly
// and months are UTC months.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// SpendByAccount sums the cost of the intervals within [from, to) per account.
func SpendByAccount(ivs []Interval, from, to time.Time) map[string]float64 {
	out := map[string]float64{}
	for _, iv := range ivs {
		if c := iv.Cost(from, to); c > 0 {
			out[iv.Account] += c
		}
	}
	return out
}

// Status is one account's standing this month.
type Status struct {
	Account      string
	MonthlyUSD   float64 // cap; 0 means no cap
	SpentUSD     float64
	RemainingUSD float64
	Over         bool
	Since        time.Time
}

// Statuses reports every account with a cap or with spend, sorted by name,
// for the month containing now.
func Statuses(caps map[string]float64, ivs []Interval, now time.Time) []Status {
	from := MonthStart(now)
	spend := SpendByAccount(ivs, from, now)
	names := map[string]bool{}
	for a := range caps {
		names[a] = true
	}
	for a := range spend {
		names[a] = true
	}
	var out []Status
	for a := range names {
		s := Status{Account: a, MonthlyUSD: caps[a], SpentUSD: spend[a], Since: from}
		if s.MonthlyUSD > 0 {
			s.RemainingUSD = max(s.MonthlyUSD-s.SpentUSD, 0)
			s.Over = s.SpentUSD >= s.MonthlyUSD
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out
}
