package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/report"
)

// BusyUtilPct: a GPU whose mean utilisation over a job is at least this
// counts as used by the job.
const BusyUtilPct = 5

// Jobs returns usage for registered jobs updated at or after since (newest
// first); user and jobName filter when not empty; limit <= 0 means all.
func (s *Store) Jobs(ctx context.Context, since time.Time, user, jobName string, limit int) ([]report.JobUsage, error) {
	q := `SELECT job_id, job_name, user, account, coalesce(class,''), coalesce(gpu_model,''), gpus_per_node, nodes, gpu_mem_mib, updated FROM jobs WHERE updated >= ?`
	args := []any{ms(since)}
	if user != "" {
		q += " AND user = ?"
		args = append(args, user)
	}
	if jobName != "" {
		q += " AND job_name = ?"
		args = append(args, jobName)
	}
	q += " ORDER BY updated DESC"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	var out []report.JobUsage
	for rows.Next() {
		var u report.JobUsage
		var upd sql.NullInt64
		if err := rows.Scan(&u.JobID, &u.JobName, &u.User, &u.Account, &u.Class, &u.GPUModel, &u.GPUsPerNode, &u.Nodes, &u.GPUMemoryMiB, &upd); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading jobs: %w", err)
		}
		u.LastSeen = fromMS(upd)
		out = append(out, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	for i := range out {
		if err := s.fillUsage(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fillUsage derives GPUs used, peak memory and mean utilisation from the
// per-GPU aggregates, or from agent job summaries when no samples arrived.
func (s *Store) fillUsage(ctx context.Context, u *report.JobUsage) error {
	rows, err := s.r.QueryContext(ctx, `SELECT node, gpu, samples, util_sum, mem_peak, mem_total FROM job_gpu WHERE job_id = ?`, u.JobID)
	if err != nil {
		return fmt.Errorf("reading usage of job %s: %w", u.JobID, err)
	}
	used := map[string]int{}
	var utilSum float64
	var nodes = map[string]bool{}
	for rows.Next() {
		var node string
		var gpu, samples int
		var us float64
		var mp, mt int64
		if err := rows.Scan(&node, &gpu, &samples, &us, &mp, &mt); err != nil {
			rows.Close()
			return fmt.Errorf("reading usage of job %s: %w", u.JobID, err)
		}
		u.Reported = true
		nodes[node] = true
		mean := us / float64(max(samples, 1))
		utilSum += mean
		if mean >= BusyUtilPct {
			used[node]++
		}
		if u.GPUMemoryMiB == 0 {
			u.GPUMemoryMiB = int(mt >> 20)
		}
	}
	rows.Close()
	for _, n := range used {
		u.GPUsUsed = max(u.GPUsUsed, n)
	}
	var peak sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT max(peak_mem) FROM job_node WHERE job_id = ?`, u.JobID).Scan(&peak); err != nil {
		return fmt.Errorf("reading peak memory of job %s: %w", u.JobID, err)
	}
	u.PeakMemMiB = int(peak.Int64 >> 20)
	alloc := u.GPUsPerNode * max(len(nodes), 1)
	if u.Reported && alloc > 0 {
		u.MeanUtilPct = utilSum / float64(alloc)
	}
	if u.Reported {
		return nil
	}
	// No samples: fall back to the agents' end-of-job summaries.
	srows, err := s.r.QueryContext(ctx, `SELECT summary FROM job_node WHERE job_id = ? AND summary IS NOT NULL`, u.JobID)
	if err != nil {
		return fmt.Errorf("reading summaries of job %s: %w", u.JobID, err)
	}
	defer srows.Close()
	var n int
	for srows.Next() {
		var raw string
		if err := srows.Scan(&raw); err != nil {
			return fmt.Errorf("reading summaries of job %s: %w", u.JobID, err)
		}
		var js sizerapi.JobSummary
		if err := json.Unmarshal([]byte(raw), &js); err != nil {
			continue
		}
		u.Reported = true
		n++
		u.GPUsUsed = max(u.GPUsUsed, len(js.GPUs))
		// The summary has the peak of the busiest GPU: assume every used GPU peaked alike.
		u.PeakMemMiB = max(u.PeakMemMiB, int(js.PeakMemoryBytes>>20)*max(len(js.GPUs), 1))
		if u.GPUsPerNode > 0 {
			u.MeanUtilPct += js.MeanUtilPercent * float64(len(js.GPUs)) / float64(u.GPUsPerNode)
		}
		if u.GPUMemoryMiB == 0 {
			u.GPUMemoryMiB = int(js.MemoryTotalBytes >> 20)
		}
	}
	if n > 0 {
		u.MeanUtilPct /= float64(n)
	}
	return srows.Err()
}

// History summarises the last limit reported jobs of a user with a job name
// for the policy's learning.
func (s *Store) History(ctx context.Context, user, jobName string, limit int) (sizing.History, error) {
	if user == "" || jobName == "" {
		return sizing.History{}, nil
	}
	jobs, err := s.Jobs(ctx, time.Time{}, user, jobName, limit)
	if err != nil {
		return sizing.History{}, err
	}
	return HistoryOf(jobs), nil
}

// HistoryOf aggregates job usages (only those with reports count).
func HistoryOf(jobs []report.JobUsage) sizing.History {
	var h sizing.History
	var util float64
	for _, j := range jobs {
		if !j.Reported {
			continue
		}
		h.Jobs++
		h.GPUsAllocated = max(h.GPUsAllocated, j.GPUsPerNode)
		h.GPUMemoryMiBAllocated = max(h.GPUMemoryMiBAllocated, j.AllocatedMemMiB())
		h.GPUsUsed = max(h.GPUsUsed, j.GPUsUsed)
		h.PeakGPUMemoryMiB = max(h.PeakGPUMemoryMiB, j.PeakMemMiB)
		util += j.MeanUtilPct
	}
	if h.Jobs > 0 {
		h.MeanUtilPct = util / float64(h.Jobs)
	}
	return h
}
