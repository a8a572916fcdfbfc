package rest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// Jobs implements slurm.Client: GET job/{id} per id (unknown ids are left
// out), GET jobs without ids.
func (c *Client) Jobs(ctx context.Context, ids ...uint32) ([]slurm.Job, error) {
	a, err := c.apiOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	if len(ids) == 0 {
		ans, err := c.call(ctx, a.jobs())
		if err != nil {
			return nil, fmt.Errorf("listing jobs: %w", err)
		}
		return decode(ans, slurm.ParseJobsJSON)
	}
	jobs, err := c.jobsByID(ctx, a, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(jobs, func(j slurm.Job) bool { return !slices.Contains(ids, j.ID) }), nil
}

// jobsByID reads GET job/{id} for each id, unknown ones left out; an
// array's ID gives every task of it.
func (c *Client) jobsByID(ctx context.Context, a *api, ids []uint32) ([]slurm.Job, error) {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	per, err := each(ctx, ids, func(ctx context.Context, id uint32) ([]slurm.Job, error) {
		ans, err := c.call(ctx, a.job(idArg(id)))
		if errors.Is(err, slurm.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading job %d: %w", id, err)
		}
		return decode(ans, slurm.ParseJobsJSON)
	})
	if err != nil {
		return nil, err
	}
	var jobs []slurm.Job
	for _, js := range per {
		jobs = append(jobs, js...)
	}
	return jobs, nil
}

// JobStates implements slurm.Client. slurmrestd filters jobs by nothing but
// ID, so without IDs a node or state filter or Max goes to the command-line
// fallback when one is configured (squeue filters and sorts: a small answer
// however long the queue); otherwise:
//   - with IDs: GET job/{id} per id;
//   - with a node filter (24.05+): GET jobs/state/ names the jobs past
//     PENDING (a pending job has no nodes), then GET job/{id} for each of
//     those, up to maxActiveJobs;
//   - otherwise GET jobs;
//
// and the jobs read are filtered here as squeue would (JobFilter.Matches).
func (c *Client) JobStates(ctx context.Context, f slurm.JobFilter) ([]slurm.JobState, error) {
	a, err := c.apiOf(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading job states: %w", err)
	}
	if len(f.IDs) == 0 && (f.Max > 0 || len(f.Nodes) > 0 || len(f.States) > 0) && c.o.Fallback != nil {
		// slurmrestd answers these only with every job (or, for a node,
		// every job's state): squeue filters and bounds them
		var out []slurm.JobState
		err := c.fallback("reading job states by node, state or the highest priority", a, "filters jobs by nothing but ID",
			func(fb slurm.Client) (err error) { out, err = fb.JobStates(ctx, f); return err })
		return out, err
	}
	var ids []uint32
	switch {
	case len(f.IDs) > 0:
		ids = f.IDs
	case len(f.Nodes) > 0 && a.jobStates != nil && !slices.ContainsFunc(f.States, func(s string) bool { return strings.EqualFold(s, "PENDING") }):
		ans, err := c.call(ctx, a.jobStates())
		if err != nil {
			return nil, fmt.Errorf("reading job states: %w", err)
		}
		all, err := decode(ans, slurm.ParseJobStatesJSON)
		if err != nil {
			return nil, fmt.Errorf("reading job states: %w", err)
		}
		// an array task is read through its array's job ID (GET job/N
		// answers every task)
		for _, s := range all {
			if s.State != "PENDING" && (len(f.States) == 0 || slices.ContainsFunc(f.States, func(w string) bool { return strings.EqualFold(w, s.State) })) {
				ids = append(ids, s.JobID)
			}
		}
		if len(ids) == 0 {
			return nil, nil
		}
		slices.Sort(ids)
		if ids = slices.Compact(ids); len(ids) > maxActiveJobs {
			ids = nil // cheaper in one call
		}
	}
	var jobs []slurm.Job
	if len(ids) == 0 {
		ans, err := c.call(ctx, a.jobs())
		if err == nil {
			jobs, err = decode(ans, slurm.ParseJobsJSON)
		}
		if err != nil {
			return nil, fmt.Errorf("reading job states: %w", err)
		}
	} else if jobs, err = c.jobsByID(ctx, a, ids); err != nil {
		return nil, fmt.Errorf("reading job states: %w", err)
	}
	var out []slurm.JobState
	for _, j := range jobs {
		if f.Matches(j) { // IDs, States and Nodes, as squeue filters
			out = append(out, j.Brief())
		}
		if f.Max > 0 && len(out) == f.Max { // no priorities here: slurmctld's order
			break
		}
	}
	return out, nil
}

// jobUpdate is the body of POST job/{id} burst sends.
type jobUpdate struct {
	Hold         *bool   `json:"hold,omitempty"`
	AdminComment *string `json:"admin_comment,omitempty"`
	BeginTime    any     `json:"begin_time,omitempty"`
}

func (c *Client) updateJob(ctx context.Context, a *api, id uint32, u jobUpdate) error {
	_, err := c.call(ctx, a.updateJob(idArg(id), jsonBody(u)))
	return err
}

// Requeue implements slurm.Client: GET job/{id}/requeue (v0.0.45, 26.05);
// earlier REST APIs have no requeue: the fallback does.
func (c *Client) Requeue(ctx context.Context, jobID uint32) error {
	a, err := c.apiOf(ctx)
	if err != nil {
		return fmt.Errorf("requeueing job %d: %w", jobID, err)
	}
	if a.requeue == nil {
		return c.fallback(fmt.Sprintf("requeueing job %d", jobID), a, "has no requeue (26.05's v0.0.45 has)",
			func(f slurm.Client) error { return f.Requeue(ctx, jobID) })
	}
	if _, err := c.call(ctx, a.requeue(idArg(jobID))); err != nil {
		return fmt.Errorf("requeueing job %d: %w", jobID, err)
	}
	return nil
}

// StartNow implements slurm.Client: POST job/{id} with begin_time now.
func (c *Client) StartNow(ctx context.Context, jobID uint32) error {
	a, err := c.apiOf(ctx)
	if err == nil {
		err = c.updateJob(ctx, a, jobID, jobUpdate{BeginTime: a.beginNow(time.Now())})
	}
	if err != nil {
		return fmt.Errorf("making job %d eligible now: %w", jobID, err)
	}
	return nil
}

// Hold implements slurm.Client: POST job/{id} with hold (and
// admin_comment: 22.05's REST API has none, so a hold with a reason goes
// to the fallback there).
func (c *Client) Hold(ctx context.Context, jobID uint32, reason string) error {
	if strings.ContainsAny(reason, "\r\n\x00") {
		return fmt.Errorf("holding job %d: reason %q has a newline or NUL", jobID, reason)
	}
	a, err := c.apiOf(ctx)
	if err != nil {
		return fmt.Errorf("holding job %d: %w", jobID, err)
	}
	hold := true
	u := jobUpdate{Hold: &hold}
	if reason != "" {
		if !a.adminComment {
			return c.fallback(fmt.Sprintf("holding job %d with a reason", jobID), a, "cannot set a job's admin comment",
				func(f slurm.Client) error { return f.Hold(ctx, jobID, reason) })
		}
		u.AdminComment = &reason
	}
	if err := c.updateJob(ctx, a, jobID, u); err != nil {
		return fmt.Errorf("holding job %d: %w", jobID, err)
	}
	return nil
}

// RequeueHold implements slurm.Client: a requeue (which makes the job
// ineligible for Slurm's requeue delay) and then a hold with the reason;
// slurmrestd has no single requeue-and-hold.
func (c *Client) RequeueHold(ctx context.Context, jobID uint32, reason string) error {
	if err := c.Requeue(ctx, jobID); err != nil {
		return fmt.Errorf("requeueing job %d held: %w", jobID, err)
	}
	if err := c.Hold(ctx, jobID, reason); err != nil {
		return fmt.Errorf("requeueing job %d held: %w", jobID, err)
	}
	return nil
}

// SetAdminComment implements slurm.Client: POST job/{id} with
// admin_comment (22.05's REST API has none: the fallback then).
func (c *Client) SetAdminComment(ctx context.Context, jobID uint32, text string) error {
	if strings.ContainsAny(text, "\r\n\x00") || len(text) > slurm.MaxAdminComment {
		return fmt.Errorf("setting the admin comment of job %d: %d bytes with a newline or NUL, or over %d", jobID, len(text), slurm.MaxAdminComment)
	}
	a, err := c.apiOf(ctx)
	if err != nil {
		return fmt.Errorf("setting the admin comment of job %d: %w", jobID, err)
	}
	if !a.adminComment {
		return c.fallback(fmt.Sprintf("setting the admin comment of job %d", jobID), a, "cannot set a job's admin comment",
			func(f slurm.Client) error { return f.SetAdminComment(ctx, jobID, text) })
	}
	if err := c.updateJob(ctx, a, jobID, jobUpdate{AdminComment: &text}); err != nil {
		return fmt.Errorf("setting the admin comment of job %d: %w", jobID, err)
	}
	return nil
}

// Release implements slurm.Client: POST job/{id} with hold false.
func (c *Client) Release(ctx context.Context, jobID uint32) error {
	a, err := c.apiOf(ctx)
	if err == nil {
		hold := false
		err = c.updateJob(ctx, a, jobID, jobUpdate{Hold: &hold})
	}
	if err != nil {
		return fmt.Errorf("releasing job %d: %w", jobID, err)
	}
	return nil
}

// Signal implements slurm.Client: DELETE job/{id}?signal=SIG (with
// flags=BATCH_JOB for the batch shell only; 22.05's REST API has no flags,
// so that goes to the fallback there).
func (c *Client) Signal(ctx context.Context, jobID uint32, sig string, batchOnly bool) error {
	sig = strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	if sig == "" || len(sig) > 8 || strings.IndexFunc(sig, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }) >= 0 {
		return fmt.Errorf("signalling job %d: signal %q: want a name like USR1 or TERM, or a number", jobID, sig)
	}
	a, err := c.apiOf(ctx)
	if err != nil {
		return fmt.Errorf("signalling job %d: %w", jobID, err)
	}
	s := a.signal(idArg(jobID), sig, batchOnly)
	if s == nil {
		return c.fallback(fmt.Sprintf("signalling the batch shell of job %d", jobID), a, "cannot signal only the batch shell",
			func(f slurm.Client) error { return f.Signal(ctx, jobID, sig, batchOnly) })
	}
	if _, err := c.call(ctx, s); err != nil {
		return fmt.Errorf("signalling job %d with %s: %w", jobID, sig, err)
	}
	return nil
}
