package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// What a job waited for (migrations/*/00013_job_waits.sql): Slurm's submit
// time beside the start burst recorded (jobs.submitted, StartRun), the
// nodes it started on (job_runs), the instance behind each (instances) and
// how that instance's node booted (node_boots, RecordBoot).

// Boot is how an instance's node booted, from its bootstrap's report.
type Boot struct {
	InstanceID string
	Node       string
	Started    time.Time // the bootstrap started
	// Slurmd is when slurmd started (registration begins), Registered
	// when slurmctld saw the node registered; zero when the boot did not
	// get there.
	Slurmd     time.Time
	Registered time.Time
}

// RecordBoot stores (replaces) an instance's boot.
func (s *Store) RecordBoot(ctx context.Context, b Boot) error {
	err := s.tx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO node_boots(instance_id, node, started, slurmd, registered) VALUES(?,?,?,?,?)
ON CONFLICT(instance_id) DO UPDATE SET node=excluded.node, started=excluded.started, slurmd=excluded.slurmd, registered=excluded.registered`,
			b.InstanceID, b.Node, ms(b.Started), nullMS(b.Slurmd), nullMS(b.Registered))
		return err
	})
	if err != nil {
		return fmt.Errorf("storing the boot of %s: %w", b.InstanceID, err)
	}
	return nil
}

// JobWait is what the store knows of a job's latest wait.
type JobWait struct {
	JobID     string
	Submitted time.Time
	Started   time.Time
	// Nodes are the nodes of the job's latest run (job_runs), each with
	// the instance of burst's launched last on it before the start, if it
	// was alive then.
	Nodes []WaitNode
}

// WaitNode is a node a job started on and the instance behind it.
type WaitNode struct {
	Node       string
	InstanceID string // "": no instance recorded on the node at the start
	Launched   time.Time
	Boot       *Boot // nil: no boot report
}

// JobWaits returns the waits of the jobs (by id) whose latest start has
// its submit time recorded, in one query.
func (s *Store) JobWaits(ctx context.Context, ids []string) (map[string]JobWait, error) {
	out := map[string]JobWait{}
	if len(ids) == 0 {
		return out, nil
	}
	b, _ := json.Marshal(ids)
	// the latest run's nodes (one start for all of them), and on each the
	// instance launched last before the job's start if it was still alive
	// then (one index probe per node, however many instances the node had)
	err := s.each(ctx, `SELECT j.job_id, j.submitted, j.started, coalesce(r.node, ''), coalesce(i.instance_id, ''), i.launched, b.started, b.slurmd, b.registered
FROM jobs j
LEFT JOIN job_runs r ON r.cluster = j.cluster AND r.job_id = j.job_id AND r.start = (SELECT max(start) FROM job_runs x WHERE x.cluster = j.cluster AND x.job_id = j.job_id)
LEFT JOIN instances i ON i.instance_id = (SELECT y.instance_id FROM instances y WHERE y.node = r.node AND y.cluster = j.cluster AND y.launched <= j.started
  ORDER BY y.launched DESC, y.instance_id DESC LIMIT 1) AND (i.terminated IS NULL OR i.terminated >= j.started)
LEFT JOIN node_boots b ON b.instance_id = i.instance_id
WHERE j.cluster = ? AND j.job_id IN (SELECT value FROM json_each(?)) AND j.submitted IS NOT NULL AND j.started IS NOT NULL
ORDER BY j.job_id, r.node`, []any{s.cluster, string(b)}, func(r *sql.Rows) error {
		var id, node, inst string
		var sub, start, launched, bs, bd, br sql.NullInt64
		if err := r.Scan(&id, &sub, &start, &node, &inst, &launched, &bs, &bd, &br); err != nil {
			return err
		}
		w, ok := out[id]
		if !ok {
			w = JobWait{JobID: id, Submitted: fromMS(sub), Started: fromMS(start)}
		}
		if node != "" {
			n := WaitNode{Node: node, InstanceID: inst, Launched: fromMS(launched)}
			if bs.Valid {
				n.Boot = &Boot{InstanceID: inst, Node: node, Started: fromMS(bs), Slurmd: fromMS(bd), Registered: fromMS(br)}
			}
			w.Nodes = append(w.Nodes, n)
		}
		out[id] = w
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the jobs' waits: %w", err)
	}
	return out, nil
}

// ClassWait is one job's wait, submit to start, and its class.
type ClassWait struct {
	Class string
	Wait  time.Duration
}

// StartedWaits returns the submit-to-start waits of the jobs whose latest
// start is at or after since (one account's when account is not empty).
func (s *Store) StartedWaits(ctx context.Context, since time.Time, account string) ([]ClassWait, error) {
	q := `SELECT coalesce(class, ''), started - submitted FROM jobs WHERE cluster = ? AND started >= ? AND submitted IS NOT NULL`
	args := []any{s.cluster, ms(since)}
	if account != "" {
		q += " AND account = ?"
		args = append(args, account)
	}
	var out []ClassWait
	err := s.each(ctx, q, args, func(r *sql.Rows) error {
		var w ClassWait
		var d int64
		if err := r.Scan(&w.Class, &d); err != nil {
			return err
		}
		w.Wait = time.Duration(max(d, 0)) * time.Millisecond
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the waits of jobs started since %s: %w", since.UTC().Format(time.RFC3339), err)
	}
	return out, nil
}
