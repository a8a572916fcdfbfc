package slurm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// ErrReservationExists is what CreateMaintReservation returns (wrapped)
// when a reservation of that name exists already.
var ErrReservationExists = errors.New("the Slurm reservation exists already")

var reservationNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// CreateMaintReservation reserves nodes (a Slurm hostlist of burst's own
// nodes) for maintenance from start to end (scontrol create reservation
// ... Flags=MAINT,IGNORE_JOBS Users=root): Slurm then starts no job on them
// whose time limit would run into the window, while the jobs already
// running there go on. The times are relative to now (StartTime=now+N
// seconds, Duration in minutes), so the head node's time zone does not
// matter; a start already past is now. The same command on Slurm 22.05,
// 24.11 and 26.05.
func (s *Scontrol) CreateMaintReservation(ctx context.Context, name string, nodeNames []string, start, end time.Time) error {
	if !reservationNameRe.MatchString(name) {
		return fmt.Errorf("creating Slurm reservation %q: want letters, digits, _ . - (at most 64)", name)
	}
	nodes, err := nodeArg(nodeNames)
	if err != nil {
		return fmt.Errorf("creating Slurm reservation %s: %w", name, err)
	}
	now := time.Now()
	in := max(int64(start.Sub(now)/time.Second), 0)
	mins := int64((end.Sub(now.Add(time.Duration(in)*time.Second)) + time.Minute - 1) / time.Minute) // rounded up: to the end at least
	if !end.After(now) {
		return fmt.Errorf("creating Slurm reservation %s: its end %s has passed", name, end.UTC().Format(time.RFC3339))
	}
	out, err := s.run(ctx, "scontrol", "create", "reservation", "ReservationName="+name, "StartTime=now+"+strconv.FormatInt(in, 10),
		"Duration="+strconv.FormatInt(mins, 10), "Nodes="+nodes, "Users=root", "Flags=MAINT,IGNORE_JOBS")
	if err != nil {
		if dupReservationRe.Match(out) || dupReservationRe.MatchString(err.Error()) {
			return fmt.Errorf("creating Slurm reservation %s: %w", name, ErrReservationExists)
		}
		return fmt.Errorf("creating Slurm reservation %s on %s: %w", name, nodes, err)
	}
	return nil
}

var (
	dupReservationRe = regexp.MustCompile(`(?i)duplicate reservation name|reservation name .* in use|already exists`)
)
