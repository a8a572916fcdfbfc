package dash

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/store"
)

// JobsQuery narrows the jobs view.
type JobsQuery struct {
	User, JobName string
	Limit         int // 0: Options.JobsLimit; at most MaxJobsLimit
}

// MaxJobsLimit bounds one jobs view.
const MaxJobsLimit = 2000

// ErrNotFound is returned for a job outside the scope (or unknown).
var ErrNotFound = errors.New("not found")

// Jobs lists the scope's jobs of the last JobsWindow, newest first (at
// most the limit), plus every job that has a live instance.
func (s *Source) Jobs(ctx context.Context, sc Scope, q JobsQuery) (sizerapi.JobsView, error) {
	now := s.o.Now()
	limit := q.Limit
	if limit <= 0 {
		limit = s.o.JobsLimit
	}
	limit = min(limit, MaxJobsLimit)
	v := sizerapi.JobsView{At: now, Account: sc.Account, Since: now.Add(-s.o.JobsWindow), Limit: limit, Jobs: []sizerapi.JobRow{}}
	base := store.JobQuery{Since: v.Since, Account: sc.Account, User: q.User, JobName: q.JobName}
	total, err := s.o.Store.CountJobs(ctx, base)
	if err != nil {
		return v, err
	}
	v.Total = total
	lq := base
	lq.Limit = limit
	us, err := s.o.Store.JobUsages(ctx, lq)
	if err != nil {
		return v, err
	}
	running, err := s.o.Store.LiveJobIDs(ctx, sc.Account)
	if err != nil {
		return v, err
	}
	have := map[string]bool{}
	for _, u := range us {
		have[u.JobID] = true
	}
	var extra []string
	for _, id := range running {
		if !have[id] {
			extra = append(extra, id)
		}
	}
	if len(extra) > 0 {
		more, err := s.o.Store.JobUsages(ctx, store.JobQuery{Account: sc.Account, User: q.User, JobName: q.JobName, JobIDs: extra})
		if err != nil {
			return v, err
		}
		us = append(more, us...)
	}
	rows, err := s.rows(ctx, us, false)
	if err != nil {
		return v, err
	}
	for _, r := range rows {
		if r.Running {
			v.Running++
		}
	}
	v.Jobs = rows
	return v, nil
}

// Job is one job of the scope, with its interruptions; ErrNotFound when
// the scope does not hold it.
func (s *Source) Job(ctx context.Context, sc Scope, id string) (sizerapi.JobRow, error) {
	us, err := s.o.Store.JobUsages(ctx, store.JobQuery{Account: sc.Account, JobIDs: []string{id}})
	if err != nil {
		return sizerapi.JobRow{}, err
	}
	if len(us) != 1 {
		return sizerapi.JobRow{}, ErrNotFound
	}
	rows, err := s.rows(ctx, us, true)
	if err != nil {
		return sizerapi.JobRow{}, err
	}
	return rows[0], nil
}

func (s *Source) rows(ctx context.Context, us []sizerapi.JobUsage, detail bool) ([]sizerapi.JobRow, error) {
	now := s.o.Now()
	ids := make([]string, len(us))
	for i, u := range us {
		ids[i] = u.JobID
	}
	runs, err := s.o.Store.JobRuns(ctx, ids)
	if err != nil {
		return nil, err
	}
	spend, err := s.o.Store.JobSpend(ctx, ids, s.o.IdleOwner, now.Add(-s.o.JobsWindow-31*24*time.Hour), now)
	if err != nil {
		return nil, err
	}
	waits, err := s.jobWaits(ctx, ids)
	if err != nil {
		return nil, err
	}
	sn := s.slurmState(ctx)
	out := make([]sizerapi.JobRow, 0, len(us))
	for _, u := range us {
		r := sizerapi.JobRow{JobID: u.JobID, JobName: u.JobName, User: u.User, Account: u.Account, Class: u.Class, GPUModel: u.GPUModel,
			Nodes: u.Nodes, GPUsPerNode: u.GPUsPerNode, Reported: u.Reported, GPUsUsed: u.GPUsUsed,
			GPUMemReqGiB: round1(float64(u.AllocatedMemMiB()) / 1024), GPUMemUsedGiB: round1(float64(u.PeakMemMiB) / 1024), MeanUtilPct: round1(u.MeanUtilPct),
			SpendUSD: round4(spend[u.JobID]), Wait: waits[u.JobID]}
		if jr := runs[u.JobID]; jr != nil {
			r.Instances, r.Started, r.Ended, r.Running = jr.Instances, jr.First, jr.Last, jr.Live > 0
			r.Requeues = max(jr.Attempts-1, 0)
			r.Decision = jr.Decision
			r.Interruptions = len(jr.Interruptions)
			for _, it := range jr.Interruptions {
				if it.Checkpointed {
					r.Checkpoints++
				}
			}
			if detail {
				r.InterruptionList = jr.Interruptions
			}
		}
		r.State = "ended"
		if r.Running {
			r.State = "running"
		}
		// Slurm's state, unless the store knows of a launch or an end
		// newer than that reading (it is cached for SlurmTTL)
		if sn != nil && sn.err == nil && !sn.at.Before(r.Started) && !sn.at.Before(r.Ended) {
			if n, err := strconv.ParseUint(u.JobID, 10, 32); err == nil {
				if j, ok := sn.jobs[uint32(n)]; ok {
					r.State = j.State
					r.Requeues = max(r.Requeues, int(j.RestartCount))
				}
			}
		}
		out = append(out, r)
	}
	// running first, then newest
	slices.SortStableFunc(out, func(a, b sizerapi.JobRow) int {
		if a.Running != b.Running {
			if a.Running {
				return -1
			}
			return 1
		}
		return 0
	})
	return out, nil
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
func round2(f float64) float64 { return math.Round(f*100) / 100 }
func round4(f float64) float64 { return math.Round(f*1e4) / 1e4 }
