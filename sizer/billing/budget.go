// Package billing is the spend ledger's arithmetic, pure: what EC2 bills an
// instance (its running segments from EC2's state events, per second, at
// least 60 s a segment, the first-hour spot-reclaim waiver), how the bill
// splits between the jobs that ran on its node and the owner of the rest,
// per-account spend, burn rates and the forecast of when a monthly cap is
// reached. Callers pass the instances and the current time.
package billing

import "time"

// MonthStart is the first instant of t's month in UTC: budgets are monthly
// and months are UTC months.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}
