package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxTimeDuration is the partition's MaxTime as a duration (0: unlimited).
// It takes Slurm's forms: INFINITE/UNLIMITED, minutes, minutes:seconds,
// hours:minutes:seconds, days-hours, days-hours:minutes and
// days-hours:minutes:seconds.
func (p Partition) MaxTimeDuration() (time.Duration, error) {
	s := strings.TrimSpace(p.MaxTime)
	switch strings.ToUpper(s) {
	case "", "INFINITE", "UNLIMITED":
		return 0, nil
	}
	bad := fmt.Errorf("%q is not a Slurm time limit; write minutes, HH:MM:SS, D-HH:MM:SS or INFINITE", s)
	num := func(x string) (int64, bool) {
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil && n >= 0 && n <= 1_000_000
	}
	var days int64
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, ok := num(d)
		if !ok {
			return 0, bad
		}
		days, rest = n, r
	}
	var f []int64
	for _, x := range strings.Split(rest, ":") {
		n, ok := num(x)
		if !ok {
			return 0, bad
		}
		f = append(f, n)
	}
	var h, m, sec int64
	switch {
	case strings.Contains(s, "-") && len(f) == 1:
		h = f[0]
	case strings.Contains(s, "-") && len(f) == 2:
		h, m = f[0], f[1]
	case len(f) == 3:
		h, m, sec = f[0], f[1], f[2]
	case !strings.Contains(s, "-") && len(f) == 1:
		m = f[0]
	case !strings.Contains(s, "-") && len(f) == 2:
		m, sec = f[0], f[1]
	default:
		return 0, bad
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec)*time.Second, nil
}
