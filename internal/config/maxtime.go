package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
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
	d, ok := slurm.ParseTimeLimit(s)
	if !ok {
		return 0, fmt.Errorf("%q is not a Slurm time limit; write minutes, HH:MM:SS, D-HH:MM:SS or INFINITE", s)
	}
	return d, nil
}
