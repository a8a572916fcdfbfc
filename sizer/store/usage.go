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
)

// BusyUtilPct: a GPU whose mean utilisation over a job is at least this
// counts as used by the job.
const BusyUtilPct = 5

// Jobs returns usage for registered jobs updated at or after since (newest
// first); user and jobName filter when not empty; limit <= 0 means all.
func (s *Store) Jobs(ctx context.Context, since time.Time, user, jobName string, limit int) ([]sizerapi.JobUsage, error) {
	return s.JobUsages(ctx, JobQuery{Since: since, User: user, JobName: jobName, Limit: limit})
}

// JobQuery selects registered jobs. Empty fields do not filter.
type JobQuery struct {
	Since   time.Time // updated at or after
	Account string
	User    string
	JobName string
	JobIDs  []string
	Limit   int // <= 0: all
}

// where is the condition selecting q's jobs of cluster.
func (q JobQuery) where(cluster string) (string, []any) {
	// Which index SQLite takes (it keeps no statistics here): by job IDs
	// the primary key (cluster, job_id), else jobs_updated for the range
	// and its order. "+n" and "s || ''" keep a column's indexes out of
	// the choice (and mean the same on PostgreSQL); without them
	// jobs_started or the primary key (each led by cluster) won, and the
	// Jobs page sorted every job of the cluster (640 ms at 100,000 jobs).
	w := "cluster || '' = ? AND updated >= ?"
	if q.JobIDs != nil {
		w = "cluster = ? AND +updated >= ?"
	}
	args := []any{cluster, ms(q.Since)}
	for _, f := range []struct{ col, v string }{{"account", q.Account}, {"user", q.User}, {"job_name", q.JobName}} {
		if f.v != "" {
			w += " AND " + f.col + " = ?"
			args = append(args, f.v)
		}
	}
	if q.JobIDs != nil {
		w += " AND job_id IN (SELECT value FROM json_each(?))"
		b, _ := json.Marshal(q.JobIDs)
		args = append(args, string(b))
	}
	return w, args
}

// selected is the subquery of the job ids q selects.
func (q JobQuery) selected(cluster string) (string, []any) {
	w, args := q.where(cluster)
	sub := "SELECT job_id FROM jobs WHERE " + w
	if q.Limit > 0 {
		sub += fmt.Sprintf(" ORDER BY updated DESC, job_id DESC LIMIT %d", q.Limit)
	}
	return sub, args
}

// JobUsages returns usage for the jobs q selects, newest first. It reads
// the per-GPU aggregates and summaries of all of them in three queries
// (not three per job), so a page over thousands of jobs stays fast.
func (s *Store) JobUsages(ctx context.Context, q JobQuery) ([]sizerapi.JobUsage, error) {
	w, args := q.where(s.cluster)
	qs := `SELECT job_id, job_name, user, account, coalesce(class,''), coalesce(gpu_model,''), gpus_per_node, nodes, gpu_mem_mib, updated FROM jobs WHERE ` + w + ` ORDER BY updated DESC, job_id DESC`
	if q.Limit > 0 {
		qs += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	rows, err := s.r.QueryContext(ctx, qs, args...)
	if err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	var out []sizerapi.JobUsage
	idx := map[string]int{}
	for rows.Next() {
		var u sizerapi.JobUsage
		var upd sql.NullInt64
		if err := rows.Scan(&u.JobID, &u.JobName, &u.User, &u.Account, &u.Class, &u.GPUModel, &u.GPUsPerNode, &u.Nodes, &u.GPUMemoryMiB, &upd); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading jobs: %w", err)
		}
		u.LastSeen = fromMS(upd)
		idx[u.JobID] = len(out)
		out = append(out, u)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading jobs: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	sub, sargs := q.selected(s.cluster)
	nodes := make([][]nodeAgg, len(out))
	// per job and node: the GPUs' mean utilisations summed, how many were
	// busy, the GPU memory size, and the node's peak memory (one row per
	// job and node, not per GPU)
	err = s.each(ctx, `SELECT g.job_id, g.node, sum(g.util_sum / max(g.samples, 1)), sum(CASE WHEN g.util_sum / max(g.samples, 1) >= ? THEN 1 ELSE 0 END), max(g.mem_total), coalesce(max(n.peak_mem), 0)
FROM job_gpu g LEFT JOIN job_node n ON n.cluster = g.cluster AND n.job_id = g.job_id AND n.node = g.node WHERE g.cluster = ? AND g.job_id IN (`+sub+`) GROUP BY g.job_id, g.node`,
		append([]any{BusyUtilPct, s.cluster}, sargs...), func(r *sql.Rows) error {
			var id string
			var a nodeAgg
			if err := r.Scan(&id, &a.node, &a.utilSum, &a.busy, &a.memTotal, &a.peak); err != nil {
				return err
			}
			if i, ok := idx[id]; ok {
				nodes[i] = append(nodes[i], a)
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("reading GPU usage of jobs: %w", err)
	}
	sums := make([][]string, len(out))
	err = s.each(ctx, `SELECT job_id, summary FROM job_node WHERE summary IS NOT NULL AND cluster = ? AND job_id IN (`+sub+`)`, append([]any{s.cluster}, sargs...), func(r *sql.Rows) error {
		var id, raw string
		if err := r.Scan(&id, &raw); err != nil {
			return err
		}
		if i, ok := idx[id]; ok {
			sums[i] = append(sums[i], raw)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading summaries of jobs: %w", err)
	}
	for i := range out {
		usageFrom(&out[i], nodes[i], sums[i])
	}
	return out, nil
}

// each runs a query and calls f for every row.
func (s *Store) each(ctx context.Context, q string, args []any, f func(*sql.Rows) error) error {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// nodeAgg is one job's GPU samples on one node.
type nodeAgg struct {
	node     string
	utilSum  float64 // the GPUs' mean utilisations, summed
	busy     int     // GPUs whose mean utilisation is at least BusyUtilPct
	memTotal int64   // one GPU's memory
	peak     int64   // the node's peak memory used by the job
}

// usageFrom derives GPUs used, peak memory and mean utilisation from a
// job's per-node GPU aggregates, or from agent job summaries when no
// samples arrived.
func usageFrom(u *sizerapi.JobUsage, nodes []nodeAgg, summaries []string) {
	var utilSum float64
	var peak int64
	for _, n := range nodes {
		u.Reported = true
		utilSum += n.utilSum
		u.GPUsUsed = max(u.GPUsUsed, n.busy)
		peak = max(peak, n.peak)
		if u.GPUMemoryMiB == 0 {
			u.GPUMemoryMiB = int(n.memTotal >> 20)
		}
	}
	u.PeakMemMiB = int(peak >> 20)
	alloc := u.GPUsPerNode * max(len(nodes), 1)
	if u.Reported && alloc > 0 {
		u.MeanUtilPct = utilSum / float64(alloc)
	}
	if u.Reported {
		return
	}
	// No samples: fall back to the agents' end-of-job summaries.
	var n int
	for _, raw := range summaries {
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
func HistoryOf(jobs []sizerapi.JobUsage) sizing.History {
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
