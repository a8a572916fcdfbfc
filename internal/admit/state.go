package admit

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/statefile"
)

// prune drops entries whose jobs Slurm no longer runs (past the grace
// period), released entries past their TTL, and held entries whose job is
// no longer held pending (cancelled, or released by someone else). jobs
// holds the held entries' jobs only when heldRead (View's withHeld): else a
// held entry whose job is not in jobs stays (held entries count against
// nothing; the next release pass prunes it).
func (c *Controller) prune(es []Entry, jobs []slurm.Job, now time.Time, heldRead bool) []Entry {
	byID := map[uint32]slurm.Job{}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	return slices.DeleteFunc(es, func(e Entry) bool {
		j, known := byID[e.JobID]
		switch e.State {
		case StateHeld:
			return now.Sub(e.At) > c.o.Grace && (!known && heldRead || known && !heldByBurst(j))
		case StateReleased:
			if known && running(j.State) {
				return false
			}
			return now.Sub(e.At) > c.o.ReleasedTTL || known && heldByBurst(j)
		}
		return now.Sub(e.At) > c.o.Grace && (!known || !running(j.State))
	})
}

// heldByBurst: the job is pending on a hold burst placed.
func heldByBurst(j slurm.Job) bool {
	return j.State == "PENDING" && onHold(j.Reason) && strings.HasPrefix(j.AdminComment, HeldPrefix)
}

// requeuedHeld is the description Slurm gives a job after `scontrol
// requeuehold` (burst's prolog holds a job that way).
const requeuedHeld = "job_requeued_in_held_state"

// onHold says whether a pending job's reason is a hold. squeue --json and
// slurmrestd give the reason's name (JobHeldAdmin, JobHeldUser); squeue's
// plain text (22.05's jobs by ID, every release's job states) and scontrol
// give the description Slurm set instead when there is one: "job requeued
// in held state" (underscores for spaces in scontrol).
func onHold(reason string) bool {
	return strings.HasPrefix(reason, "JobHeld") || strings.ReplaceAll(strings.TrimSpace(reason), " ", "_") == requeuedHeld
}

// Reservations returns the admitted and released entries (what counts
// against the caps now), for the API and the forecast.
func (c *Controller) Reservations() ([]Entry, error) {
	es, err := c.read()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(es, func(e Entry) bool { return e.State == StateHeld }), nil
}

// Reserved sums what is left of an account's reservations (see Admit);
// charged is by sizerapi.JobKey, home the cluster of entries without one.
func Reserved(es []Entry, account string, charged map[string]float64, home string) float64 {
	return reserved(account, es, charged, home)
}

// mine is the Cluster of this cluster's entries: its name in a Shared
// document, none in the admissions file.
func (c *Controller) mine() string {
	if c.o.Shared == nil {
		return ""
	}
	return c.o.Cluster
}

func (c *Controller) read() ([]Entry, error) {
	if c.o.Shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b, err := c.o.Shared.ReadAdmissions(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the shared admissions: %w", err)
		}
		return decode(b), nil
	}
	b, err := statefile.ReadLocked(c.path, 0o600)
	if err != nil {
		return nil, err
	}
	return decode(b), nil
}

// decode reads the file; a corrupt file counts as empty (its jobs are
// then re-decided: a held one is released by the next pass, see
// ReleaseHeld).
func decode(b []byte) []Entry {
	var d doc
	if len(b) == 0 || json.Unmarshal(b, &d) != nil {
		return nil
	}
	return slices.DeleteFunc(d.Entries, func(e Entry) bool {
		return e.JobID == 0 || (e.State != StateAdmitted && e.State != StateHeld && e.State != StateReleased)
	})
}

// update runs f on this cluster's entries (foreign: the other clusters'
// in a shared document, read only) under the document's lock and writes
// what it returns when it says so.
func (c *Controller) update(ctx context.Context, f func(es, foreign []Entry, now time.Time) ([]Entry, bool)) error {
	apply := func(old []byte) ([]byte, bool, error) {
		var mine, foreign []Entry
		for _, e := range decode(old) {
			if e.Cluster == c.mine() {
				mine = append(mine, e)
			} else {
				foreign = append(foreign, e)
			}
		}
		es, write := f(mine, foreign, c.o.Now())
		if !write {
			return nil, false, nil
		}
		es = append(es, foreign...)
		sort.SliceStable(es, func(i, j int) bool { return es[i].At.Before(es[j].At) })
		b, err := json.MarshalIndent(doc{Version: 1, Entries: es}, "", "  ")
		return b, err == nil, err
	}
	if c.o.Shared != nil {
		if err := c.o.Shared.UpdateAdmissions(ctx, apply); err != nil {
			return fmt.Errorf("updating the shared admissions: %w", err)
		}
		return nil
	}
	if err := statefile.Update(c.path, 0o600, apply); err != nil {
		return fmt.Errorf("updating the admissions file %s: %w", c.path, err)
	}
	return nil
}
