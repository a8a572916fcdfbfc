package admit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// Slurm is what releasing held jobs needs.
type Slurm interface {
	Release(ctx context.Context, jobID uint32) error
	StartNow(ctx context.Context, jobID uint32) error
	SetAdminComment(ctx context.Context, jobID uint32, text string) error
}

// ReleaseHeld releases the jobs burst holds that fit now, oldest hold
// first, counting each one released against the caps before the next (so
// one freed GPU releases one job, not all of them). jobs is Slurm's view:
// View's with its held entries' jobs (plus HeldWithoutEntry's in the sizer),
// or every job. A held job with no entry (the file was lost) is released:
// its resume decides again. Released jobs are made eligible at once
// (Slurm's requeue delay would hold them for two more minutes).
func (c *Controller) ReleaseHeld(ctx context.Context, jobs []slurm.Job, sl Slurm) ([]uint32, error) {
	var held []slurm.Job
	for _, j := range jobs {
		if heldByBurst(j) {
			held = append(held, j)
		}
	}
	if len(held) == 0 {
		return nil, nil
	}
	spends := map[string]spendResult{}
	for _, j := range held {
		if b, ok := c.o.Budgets[j.Account]; ok && b.CapUSD > 0 {
			if _, done := spends[j.Account]; !done {
				spends[j.Account] = c.spend(ctx, j.Account)
			}
		}
	}
	var release []uint32
	err := c.update(ctx, func(es, foreign []Entry, now time.Time) ([]Entry, bool) {
		es = c.prune(es, jobs, now, true)
		byID := map[uint32]int{}
		for i, e := range es {
			byID[e.JobID] = i
		}
		sort.SliceStable(held, func(a, b int) bool {
			ia, oka := byID[held[a].ID]
			ib, okb := byID[held[b].ID]
			switch {
			case oka && okb:
				return es[ia].At.Before(es[ib].At)
			case oka != okb:
				return !oka // lost entries first: they are released outright
			}
			return held[a].ID < held[b].ID
		})
		changed := false
		for _, j := range held {
			i, ok := byID[j.ID]
			if !ok {
				release = append(release, j.ID)
				continue
			}
			e := es[i]
			others := slices.DeleteFunc(slices.Clone(es), func(x Entry) bool { return x.JobID == e.JobID })
			if fit, reason, _ := c.fits(e, append(others, foreign...), jobs, spends); !fit {
				if reason != e.Reason {
					es[i].Reason, changed = reason, true
				}
				continue
			}
			es[i].State, es[i].Reason, es[i].At = StateReleased, "", now
			release = append(release, j.ID)
			changed = true
		}
		return es, changed
	})
	if err != nil {
		return nil, err
	}
	return c.release(ctx, release, sl)
}

// release releases the jobs in Slurm, noting why on each and making it
// eligible now; it returns those released.
func (c *Controller) release(ctx context.Context, ids []uint32, sl Slurm) ([]uint32, error) {
	var errs []error
	var done []uint32
	for _, id := range ids {
		if err := sl.Release(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("releasing held job %d: %w", id, err))
			continue
		}
		done = append(done, id)
		note := "burst " + c.o.Now().UTC().Format("2006-01-02T15:04:05Z") + ": released: it fits its account's budget and limits now"
		if err := sl.SetAdminComment(ctx, id, note); err != nil {
			c.o.Log.Warn("noting the release on the job", "job", id, "err", err)
		}
		if err := sl.StartNow(ctx, id); err != nil {
			c.o.Log.Warn("making a released job eligible now; Slurm's requeue delay applies", "job", id, "err", err)
		}
	}
	if len(done) > 0 {
		c.o.Log.Info("released held jobs that fit now", "jobs", done)
	}
	return done, errors.Join(errs...)
}
