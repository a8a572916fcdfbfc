package slurm

import (
	"strconv"
	"strings"
	"time"
)

// ParseTimeLimit reads a Slurm time limit in its numeric forms: minutes,
// minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes
// and days-hours:minutes:seconds (each field 0..1,000,000). The words
// (INFINITE, UNLIMITED) are the caller's: ok is false for them as for
// anything else that is not such a time. burst.yaml's partition MaxTime and
// burst-sizer route's --time read limits with it; squeue's own output has
// parseTimeLimit (days always with hours:minutes:seconds, no bound: NO_VAL
// shows as 2982616 days).
func ParseTimeLimit(s string) (d time.Duration, ok bool) {
	num := func(x string) (int64, bool) {
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil && n >= 0 && n <= 1_000_000
	}
	var days int64
	rest := s
	withDays := false
	if ds, r, found := strings.Cut(s, "-"); found {
		n, ok := num(ds)
		if !ok {
			return 0, false
		}
		days, rest, withDays = n, r, true
	}
	var f []int64
	for _, x := range strings.Split(rest, ":") {
		n, ok := num(x)
		if !ok {
			return 0, false
		}
		f = append(f, n)
	}
	if len(f) > 3 {
		return 0, false
	}
	// the units of one, two or three fields: after a day count the first is
	// hours, else minutes unless there are three
	units := [][]time.Duration{{time.Minute}, {time.Minute, time.Second}, {time.Hour, time.Minute, time.Second}}
	if withDays {
		units[0], units[1] = []time.Duration{time.Hour}, []time.Duration{time.Hour, time.Minute}
	}
	d = time.Duration(days) * 24 * time.Hour
	for i, n := range f {
		d += time.Duration(n) * units[len(f)-1][i]
	}
	return d, true
}
