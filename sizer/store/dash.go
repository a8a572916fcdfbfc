package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// What the dashboard reads besides usage and spend: the sizer's decision
// for each job, each launch attempt (requeues), what the agents did to
// jobs on a spot notice (checkpoints, requeues), and when each node's agent
// last reported (the tables: migrations/).

// RecordDecision stores (replaces) a job's decision.
func (s *Store) RecordDecision(ctx context.Context, d sizerapi.JobDecision) error {
	err := s.tx(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO job_decisions(cluster, job_id, ts, class, instance_type, zone, capacity, price, expected, reason, offerings, avoided, comment) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(cluster, job_id) DO UPDATE SET ts=excluded.ts, class=excluded.class, instance_type=excluded.instance_type, zone=excluded.zone, capacity=excluded.capacity,
price=excluded.price, expected=excluded.expected, reason=excluded.reason, offerings=excluded.offerings, avoided=excluded.avoided, comment=excluded.comment`,
			s.cluster, d.JobID, ms(d.Time), d.Class, d.InstanceType, d.Zone, d.Capacity, d.PriceUSD, d.ExpectedUSD, d.Reason, d.Offerings, d.Avoided, d.Comment)
		return err
	})
	if err != nil {
		return fmt.Errorf("storing the decision for job %s: %w", d.JobID, err)
	}
	return nil
}

// recordAttempt notes a launch attempt of a job (attempt = Slurm's restart
// count + 1).
func (s *Store) recordAttempt(ctx context.Context, tx *Tx, jobID string, attempt int, at time.Time) error {
	if jobID == "" || attempt <= 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO job_attempts(cluster, job_id, attempt, ts) VALUES(?,?,?,?)`, s.cluster, jobID, attempt, ms(at))
	return err
}

func (s *Store) addInterruptionJobs(ctx context.Context, tx *Tx, instanceID string, at time.Time, jobs []sizerapi.JobEvent) error {
	for _, j := range jobs {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO interruption_jobs(cluster, instance_id, ts, job_id, signal, checkpointed, requeued, waited_ms, error) VALUES(?,?,?,?,?,?,?,?,?)`,
			s.cluster, instanceID, ms(at), fmt.Sprint(j.JobID), j.Signal, j.Checkpointed, j.Requeued, j.Waited.Milliseconds(), j.Error); err != nil {
			return err
		}
	}
	return nil
}

func markSeen(ctx context.Context, tx *Tx, node, instanceID string, at time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO node_seen(node, instance_id, last_ts) VALUES(?,?,?)
ON CONFLICT(node) DO UPDATE SET instance_id = coalesce(nullif(excluded.instance_id, ''), instance_id), last_ts = max(last_ts, excluded.last_ts)`, node, instanceID, ms(at))
	return err
}

// Instance is one stored instance launch.
type Instance struct {
	InstanceID   string    `json:"instance_id"`
	Node         string    `json:"node"`
	InstanceType string    `json:"instance_type"`
	Zone         string    `json:"zone"`
	Capacity     string    `json:"capacity"`
	PriceUSD     float64   `json:"price_usd_h"`
	Account      string    `json:"account"`
	User         string    `json:"user"`
	JobID        string    `json:"job_id"`
	Launched     time.Time `json:"launched"`
	Terminated   time.Time `json:"terminated,omitzero"`
}

// Instances returns the instances alive at some point in [from, to) (all
// accounts when account is empty); live only: those not terminated.
func (s *Store) Instances(ctx context.Context, from, to time.Time, account string, liveOnly bool) ([]Instance, error) {
	q := `SELECT i.instance_id, coalesce(i.node,''), coalesce(i.instance_type,''), coalesce(i.zone,''), coalesce(i.capacity,''), i.price, coalesce(i.account,''),
coalesce(j.user,''), coalesce(i.job_id,''), i.launched, i.terminated FROM instances i LEFT JOIN jobs j ON j.cluster = i.cluster AND j.job_id = i.job_id
WHERE i.launched < ? AND (i.terminated IS NULL OR i.terminated >= ?)`
	args := []any{ms(to), ms(from)}
	if liveOnly {
		q += " AND i.terminated IS NULL"
	}
	if account != "" {
		q += " AND i.account = ?"
		args = append(args, account)
	}
	q += " ORDER BY i.launched, i.instance_id"
	var out []Instance
	err := s.each(ctx, q, args, func(r *sql.Rows) error {
		var in Instance
		var l, t sql.NullInt64
		if err := r.Scan(&in.InstanceID, &in.Node, &in.InstanceType, &in.Zone, &in.Capacity, &in.PriceUSD, &in.Account, &in.User, &in.JobID, &l, &t); err != nil {
			return err
		}
		in.Launched, in.Terminated = fromMS(l), fromMS(t)
		out = append(out, in)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading instances: %w", err)
	}
	return out, nil
}

// JobRun is what happened to a job on burst's nodes.
type JobRun struct {
	JobID     string
	Instances int
	Live      int // instances not terminated
	First     time.Time
	Last      time.Time // latest termination; zero while one runs
	Attempts  int       // launch attempts (requeues = Attempts - 1)
	Decision  *sizerapi.JobDecision
	// Interruptions are the spot notices of the job's instances.
	Interruptions []sizerapi.JobInterruption
}

// JobRuns returns the runs of jobs (by id) in three queries.
func (s *Store) JobRuns(ctx context.Context, ids []string) (map[string]*JobRun, error) {
	out := make(map[string]*JobRun, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	for _, id := range ids {
		out[id] = &JobRun{JobID: id}
	}
	b, _ := json.Marshal(ids)
	set := string(b)
	err := s.each(ctx, `SELECT job_id, count(*), sum(CASE WHEN terminated IS NULL THEN 1 ELSE 0 END), min(launched), max(terminated) FROM instances
WHERE cluster = ? AND job_id IN (SELECT value FROM json_each(?)) GROUP BY job_id`, []any{s.cluster, set}, func(r *sql.Rows) error {
		var id string
		var n, live int
		var first, last sql.NullInt64
		if err := r.Scan(&id, &n, &live, &first, &last); err != nil {
			return err
		}
		jr := out[id]
		jr.Instances, jr.Live, jr.First = n, live, fromMS(first)
		if live == 0 {
			jr.Last = fromMS(last)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the jobs' instances: %w", err)
	}
	err = s.each(ctx, `SELECT job_id, max(attempt) FROM job_attempts WHERE cluster = ? AND job_id IN (SELECT value FROM json_each(?)) GROUP BY job_id`, []any{s.cluster, set}, func(r *sql.Rows) error {
		var id string
		var n int
		if err := r.Scan(&id, &n); err != nil {
			return err
		}
		out[id].Attempts = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the jobs' attempts: %w", err)
	}
	err = s.each(ctx, `SELECT job_id, ts, coalesce(class,''), coalesce(instance_type,''), coalesce(zone,''), coalesce(capacity,''), coalesce(price,0), coalesce(expected,0),
coalesce(reason,''), coalesce(offerings,0), coalesce(avoided,0), coalesce(comment,'') FROM job_decisions WHERE cluster = ? AND job_id IN (SELECT value FROM json_each(?))`,
		[]any{s.cluster, set}, func(r *sql.Rows) error {
			var d sizerapi.JobDecision
			var ts sql.NullInt64
			if err := r.Scan(&d.JobID, &ts, &d.Class, &d.InstanceType, &d.Zone, &d.Capacity, &d.PriceUSD, &d.ExpectedUSD, &d.Reason, &d.Offerings, &d.Avoided, &d.Comment); err != nil {
				return err
			}
			d.Time = fromMS(ts)
			out[d.JobID].Decision = &d
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("reading the jobs' decisions: %w", err)
	}
	// Spot notices: what the agent reported per job, else the notice of the
	// instance launched for the job.
	err = s.each(ctx, `SELECT ij.job_id, it.instance_id, coalesce(it.node,''), coalesce(it.action,''), it.ts, 1, coalesce(ij.signal,''), ij.checkpointed, ij.requeued, ij.waited_ms, coalesce(ij.error,'')
FROM interruptions it JOIN interruption_jobs ij ON ij.instance_id = it.instance_id AND ij.ts = it.ts WHERE ij.cluster = ?2 AND ij.job_id IN (SELECT value FROM json_each(?1))
UNION ALL
SELECT i.job_id, it.instance_id, coalesce(it.node,''), coalesce(it.action,''), it.ts, 0, '', 0, 0, 0, '' FROM interruptions it JOIN instances i ON i.instance_id = it.instance_id
WHERE i.cluster = ?2 AND i.job_id IN (SELECT value FROM json_each(?1)) AND NOT EXISTS (SELECT 1 FROM interruption_jobs ij WHERE ij.instance_id = it.instance_id AND ij.ts = it.ts)
ORDER BY 5`, []any{set, s.cluster}, func(r *sql.Rows) error {
		var id string
		var in sizerapi.JobInterruption
		var ts, waited sql.NullInt64
		if err := r.Scan(&id, &in.InstanceID, &in.Node, &in.Action, &ts, &in.Reported, &in.Signal, &in.Checkpointed, &in.Requeued, &waited, &in.Error); err != nil {
			return err
		}
		in.Time, in.Waited = fromMS(ts), time.Duration(waited.Int64)*time.Millisecond
		if jr := out[id]; jr != nil {
			jr.Interruptions = append(jr.Interruptions, in)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the jobs' interruptions: %w", err)
	}
	return out, nil
}

// LiveJobIDs returns the jobs with an instance not terminated (all
// accounts when account is empty).
func (s *Store) LiveJobIDs(ctx context.Context, account string) ([]string, error) {
	q := `SELECT DISTINCT i.job_id FROM instances i JOIN jobs j ON j.cluster = i.cluster AND j.job_id = i.job_id WHERE i.cluster = ? AND i.terminated IS NULL AND i.job_id != ''`
	args := []any{s.cluster}
	if account != "" {
		q += " AND j.account = ?"
		args = append(args, account)
	}
	var out []string
	err := s.each(ctx, q, args, func(r *sql.Rows) error {
		var id string
		if err := r.Scan(&id); err != nil {
			return err
		}
		out = append(out, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading running jobs: %w", err)
	}
	return out, nil
}

// NodeSeen is when a node's agent last reported (the sizer's clock).
type NodeSeen struct {
	Node       string
	InstanceID string
	Last       time.Time
}

// NodesSeen returns every node's last report.
func (s *Store) NodesSeen(ctx context.Context) (map[string]NodeSeen, error) {
	out := map[string]NodeSeen{}
	err := s.each(ctx, `SELECT node, coalesce(instance_id,''), last_ts FROM node_seen`, nil, func(r *sql.Rows) error {
		var n NodeSeen
		var ts sql.NullInt64
		if err := r.Scan(&n.Node, &n.InstanceID, &ts); err != nil {
			return err
		}
		n.Last = fromMS(ts)
		out[n.Node] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the nodes' last reports: %w", err)
	}
	return out, nil
}

// InterruptionRow is a spot notice with the account and job of the
// instance it hit.
type InterruptionRow struct {
	sizerapi.Interruption
	Account string
	JobID   string
}

// InterruptionsOf returns notices at or after since, newest first, of one
// account's instances (all when account is empty).
func (s *Store) InterruptionsOf(ctx context.Context, since time.Time, account string) ([]InterruptionRow, error) {
	q := `SELECT it.instance_id, coalesce(it.node,''), coalesce(it.instance_type,''), coalesce(it.zone,''), coalesce(it.action,''), it.ts, coalesce(i.account,''), coalesce(i.job_id,'')
FROM interruptions it LEFT JOIN instances i ON i.instance_id = it.instance_id WHERE it.ts >= ?`
	args := []any{ms(since)}
	if account != "" {
		q += " AND i.account = ?"
		args = append(args, account)
	}
	q += " ORDER BY it.ts DESC"
	var out []InterruptionRow
	err := s.each(ctx, q, args, func(r *sql.Rows) error {
		var in InterruptionRow
		var ts sql.NullInt64
		if err := r.Scan(&in.InstanceID, &in.Node, &in.InstanceType, &in.Zone, &in.Action, &ts, &in.Account, &in.JobID); err != nil {
			return err
		}
		in.Time = fromMS(ts)
		out = append(out, in)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading interruptions: %w", err)
	}
	return out, nil
}

// CountJobs counts the jobs q selects (its Limit aside).
func (s *Store) CountJobs(ctx context.Context, q JobQuery) (int, error) {
	w, args := q.where(s.cluster)
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE `+w, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting jobs: %w", err)
	}
	return n, nil
}

// JobSpend is each job's charges in the ledger (its runs on burst nodes,
// and under owner launching-job the idle time of the instances launched
// for it), over the instances alive since since.
func (s *Store) JobSpend(ctx context.Context, ids []string, owner string, since, now time.Time) (map[string]float64, error) {
	out := map[string]float64{}
	if len(ids) == 0 {
		return out, nil
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	// only the instances a job can owe for: those launched for it (their
	// idle time) and those on its nodes while it ran there. A node holds
	// one instance at a time: the one launched last before a run's start,
	// and any launched during the run (each an index lookup on the node's
	// launches, not a scan of every instance the node ever had; a
	// candidate that did not overlap the run is charged nothing for it).
	b, _ := json.Marshal(ids)
	var of []string
	err := s.each(ctx, `SELECT instance_id FROM instances WHERE cluster = ? AND job_id IN (SELECT value FROM json_each(?))
UNION SELECT coalesce((SELECT y.instance_id FROM instances y WHERE y.cluster = r.cluster AND y.node = r.node AND y.launched <= r.start
  ORDER BY y.launched DESC LIMIT 1), '') FROM job_runs r WHERE r.cluster = ? AND r.job_id IN (SELECT value FROM json_each(?))
UNION SELECT i.instance_id FROM job_runs r JOIN instances i ON i.cluster = r.cluster AND i.node = r.node
WHERE r.cluster = ? AND r.job_id IN (SELECT value FROM json_each(?)) AND i.launched > r.start AND i.launched <= coalesce(r."end", ?)`,
		[]any{s.cluster, string(b), s.cluster, string(b), s.cluster, string(b), ms(now)}, func(r *sql.Rows) error {
			var id string
			if err := r.Scan(&id); err != nil {
				return err
			}
			if id != "" {
				of = append(of, id)
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("reading the jobs' instances: %w", err)
	}
	if len(of) == 0 {
		return out, nil
	}
	ob, _ := json.Marshal(of)
	rows, err := s.rows(ctx, since, now, &rowsOf{ids: string(ob), nodes: "[]"})
	if err != nil {
		return nil, fmt.Errorf("reading the jobs' spend: %w", err)
	}
	far := now.AddDate(1, 0, 0)
	for _, r := range rows {
		for _, c := range r.Charges(since, far, now, owner) {
			if want[c.JobID] {
				out[c.JobID] += c.USD
			}
		}
	}
	return out, nil
}
