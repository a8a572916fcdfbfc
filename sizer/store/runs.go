package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
)

// The tables (schema: migrations/): reports_seen deduplicates agent records by instance, node and
// seq (a new instance that reuses a node name starts its seq at 1 again);
// jobs holds each job's request once: upsertJob writes it (and updated)
// when an instance launches for the job, StartRun when the job starts on a
// burst node (with job_key, its sizing.RecurringKey, and started), EndRun
// how it ended. The rows with a job_key are the history of recurring jobs.

// StartRun records that a job started on burst nodes under a recurring-job
// key. A job started again (requeued) keeps one row, its latest start.
func (s *Store) StartRun(ctx context.Context, key string, r sizerapi.JobStart) error {
	if r.JobID == "" || key == "" {
		return errors.New("storing job start: job id and key are required")
	}
	err := s.tx(ctx, func(tx *Tx) error {
		// submitted goes with the latest start: a start without one (a
		// launch for a new attempt) clears it until that attempt's start
		// is recorded
		_, err := tx.ExecContext(ctx, `INSERT INTO jobs(cluster, job_id, job_key, user, job_name, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, started, submitted) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(cluster, job_id) DO UPDATE SET job_key=excluded.job_key, user=excluded.user, job_name=excluded.job_name, account=excluded.account,
class=coalesce(excluded.class, class), gpu_model=coalesce(excluded.gpu_model, gpu_model), gpus_per_node=max(gpus_per_node, excluded.gpus_per_node),
nodes=max(nodes, excluded.nodes), gpu_mem_mib=max(gpu_mem_mib, excluded.gpu_mem_mib), started=max(coalesce(started, 0), excluded.started),
submitted=CASE WHEN excluded.started >= coalesce(started, 0) THEN excluded.submitted ELSE submitted END`,
			s.cluster, r.JobID, key, r.User, r.JobName, r.Account, nullStr(r.Class), nullStr(r.GPUModel), r.GPUsPerNode, max(r.Nodes, 1), r.GPUMemoryMiB, ms(r.Start), nullMS(r.Submit))
		return err
	})
	if err != nil {
		return fmt.Errorf("storing start of job %s: %w", r.JobID, err)
	}
	return nil
}

// nullMS is t in milliseconds, NULL when zero.
func nullMS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ms(t)
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// EndRun records how a job ended; known is false for a job never started.
func (s *Store) EndRun(ctx context.Context, e sizerapi.JobEnd) (known bool, err error) {
	err = s.tx(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET ended=?, exit_code=?, oom=?, evidence=? WHERE cluster=? AND job_id=? AND started IS NOT NULL`,
			ms(e.End), e.ExitCode, boolInt(e.OOM), e.Evidence, s.cluster, e.JobID)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		known = n > 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("storing end of job %s: %w", e.JobID, err)
	}
	return known, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// OOMFullFraction: a run that failed while one of its GPUs was at least
// this full counts as out of GPU memory even when its output said nothing
// (NVML's reading, from the agent's reports).
const OOMFullFraction = 0.97

// run is one past run and what the agents measured of it.
type run struct {
	jobID, class, gpuModel string
	gpn, nodes, memMiB     int
	started                time.Time
	ended                  bool
	exit                   int
	oom                    bool
	evidence               string
	// measured (real GPUs only)
	reported    bool
	busyPerNode int     // most busy GPUs on one node
	peakNode    int     // MiB, busiest node
	peakGPU     int     // MiB, fullest GPU
	peakTotal   int     // MiB, summed over nodes
	totalMem    int     // MiB, of the fullest GPU's model
	util        float64 // mean over allocated GPUs
}

// HistoryByKey summarises the last limit runs of a recurring job for the
// sizing policy (newest first): usage of the runs with real GPU reports,
// and the newest run in that window that ran out of GPU memory (its output
// said so, or it failed with a GPU at least OOMFullFraction full): every
// later run gets more GPU memory than it had, until it leaves the window.
func (s *Store) HistoryByKey(ctx context.Context, key string, limit int) (sizing.History, error) {
	h := sizing.History{Key: key}
	if key == "" {
		return h, nil
	}
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.r.QueryContext(ctx, `SELECT job_id, coalesce(class,''), coalesce(gpu_model,''), gpus_per_node, nodes, gpu_mem_mib, started, ended, coalesce(exit_code,0), oom, coalesce(evidence,'')
FROM jobs WHERE cluster || '' = ? AND job_key = ? ORDER BY started DESC LIMIT ?`, s.cluster, key, limit) // by jobs_key: SQLite keeps no statistics, and jobs_started(cluster, started) would have it walk every job of the cluster for a key with few
	if err != nil {
		return h, fmt.Errorf("reading history of %s: %w", key, err)
	}
	var runs []run
	for rows.Next() {
		var r run
		var st, en sql.NullInt64
		var oom int
		if err := rows.Scan(&r.jobID, &r.class, &r.gpuModel, &r.gpn, &r.nodes, &r.memMiB, &st, &en, &r.exit, &oom, &r.evidence); err != nil {
			rows.Close()
			return h, fmt.Errorf("reading history of %s: %w", key, err)
		}
		r.started, r.ended, r.oom = fromMS(st), en.Valid, oom == 1
		runs = append(runs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return h, fmt.Errorf("reading history of %s: %w", key, err)
	}
	var util float64
	for i := range runs {
		r := &runs[i]
		if err := s.measure(ctx, r); err != nil {
			return h, err
		}
		if r.ended && !r.oom && r.exit != 0 && r.reported && r.totalMem > 0 && float64(r.peakGPU) >= OOMFullFraction*float64(r.totalMem) {
			r.oom = true
			r.evidence = fmt.Sprintf("exit code %d with a GPU at %.1f of %.1f GiB (NVML)", r.exit, float64(r.peakGPU)/1024, float64(r.totalMem)/1024)
		}
		if r.ended && r.oom && h.LastOOM == nil {
			// the newest run that ran out of memory: later runs keep more
			// than it had while it is in the window
			h.LastOOM = &sizing.OOMRun{JobID: r.jobID, Class: r.class, Nodes: r.nodes, GPUsPerNode: r.gpn, GPUMemoryMiB: r.memMiB, Evidence: r.evidence}
			if h.LastOOM.GPUMemoryMiB == 0 {
				h.LastOOM.GPUMemoryMiB = r.totalMem
			}
		}
		if !r.reported || r.oom {
			continue
		}
		h.Jobs++
		h.GPUsAllocated = max(h.GPUsAllocated, r.gpn)
		h.NodesAllocated = max(h.NodesAllocated, r.nodes)
		mem := r.memMiB
		if mem == 0 {
			mem = r.totalMem
		}
		h.GPUMemoryMiBAllocated = max(h.GPUMemoryMiBAllocated, r.gpn*mem)
		h.GPUsUsed = max(h.GPUsUsed, r.busyPerNode)
		h.PeakGPUMemoryMiB = max(h.PeakGPUMemoryMiB, r.peakNode)
		h.PeakPerGPUMiB = max(h.PeakPerGPUMiB, r.peakGPU)
		if r.peakTotal > h.PeakJobGPUMemoryMiB {
			h.PeakJobGPUMemoryMiB = r.peakTotal
			h.JobGPUMemoryMiB = r.gpn * mem * max(r.nodes, 1)
		}
		util += r.util
	}
	if h.Jobs > 0 {
		h.MeanUtilPct = util / float64(h.Jobs)
	}
	return h, nil
}

// measure fills a run's usage from the per-GPU aggregates.
func (s *Store) measure(ctx context.Context, r *run) error {
	rows, err := s.r.QueryContext(ctx, `SELECT node, samples, util_sum, mem_peak, mem_total FROM job_gpu WHERE cluster = ? AND job_id = ?`, s.cluster, r.jobID)
	if err != nil {
		return fmt.Errorf("reading usage of job %s: %w", r.jobID, err)
	}
	busy := map[string]int{}
	nodes := map[string]bool{}
	var utilSum float64
	for rows.Next() {
		var node string
		var samples int
		var us float64
		var mp, mt int64
		if err := rows.Scan(&node, &samples, &us, &mp, &mt); err != nil {
			rows.Close()
			return fmt.Errorf("reading usage of job %s: %w", r.jobID, err)
		}
		r.reported = true
		nodes[node] = true
		mean := us / float64(max(samples, 1))
		utilSum += mean
		if mean >= BusyUtilPct {
			busy[node]++
		}
		if int(mp>>20) > r.peakGPU {
			r.peakGPU, r.totalMem = int(mp>>20), int(mt>>20)
		}
		if r.totalMem == 0 {
			r.totalMem = int(mt >> 20)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading usage of job %s: %w", r.jobID, err)
	}
	for _, n := range busy {
		r.busyPerNode = max(r.busyPerNode, n)
	}
	prow, err := s.r.QueryContext(ctx, `SELECT peak_mem FROM job_node WHERE cluster = ? AND job_id = ?`, s.cluster, r.jobID)
	if err != nil {
		return fmt.Errorf("reading peak memory of job %s: %w", r.jobID, err)
	}
	defer prow.Close()
	for prow.Next() {
		var p int64
		if err := prow.Scan(&p); err != nil {
			return fmt.Errorf("reading peak memory of job %s: %w", r.jobID, err)
		}
		r.peakNode = max(r.peakNode, int(p>>20))
		r.peakTotal += int(p >> 20)
	}
	if alloc := r.gpn * max(len(nodes), 1); r.reported && alloc > 0 {
		r.util = utilSum / float64(alloc)
	}
	return prow.Err()
}
