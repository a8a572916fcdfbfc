package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/budget"
)

func upsertJob(ctx context.Context, tx *sql.Tx, j sizerapi.Job, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO jobs(job_id, job_name, user, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, updated) VALUES(?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(job_id) DO UPDATE SET job_name=excluded.job_name, user=excluded.user, account=excluded.account, class=excluded.class, gpu_model=excluded.gpu_model,
gpus_per_node=excluded.gpus_per_node, nodes=max(nodes, excluded.nodes), gpu_mem_mib=excluded.gpu_mem_mib, updated=excluded.updated`,
		j.JobID, j.JobName, j.User, j.Account, j.Class, j.GPUModel, j.GPUsPerNode, max(j.Nodes, 1), j.GPUMemoryMiB, ms(now))
	return err
}

// UpsertJob records a job's owner and allocation.
func (s *Store) UpsertJob(ctx context.Context, j sizerapi.Job, now time.Time) error {
	if err := s.tx(ctx, func(tx *sql.Tx) error { return upsertJob(ctx, tx, j, now) }); err != nil {
		return fmt.Errorf("storing job %s: %w", j.JobID, err)
	}
	return nil
}

// RecordLaunch stores an instance launch at price USD/hour (and its job, if
// given). A repeated launch of the same instance keeps the first launch time.
func (s *Store) RecordLaunch(ctx context.Context, ev sizerapi.InstanceEvent, price float64) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		jobID := ""
		if ev.Job != nil {
			jobID = ev.Job.JobID
			if ev.Account == "" {
				ev.Account = ev.Job.Account
			}
			if err := upsertJob(ctx, tx, *ev.Job, ev.Time); err != nil {
				return err
			}
			if err := recordAttempt(ctx, tx, jobID, ev.Job.Attempt, ev.Time); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO instances(instance_id, node, instance_type, zone, capacity, price, account, job_id, launched) VALUES(?,?,?,?,?,?,?,?,?)
ON CONFLICT(instance_id) DO UPDATE SET node=excluded.node, instance_type=excluded.instance_type, zone=excluded.zone, capacity=excluded.capacity, price=excluded.price, account=excluded.account, job_id=excluded.job_id`,
			ev.InstanceID, ev.Node, ev.InstanceType, ev.Zone, ev.Capacity, price, ev.Account, jobID, ms(ev.Time))
		return err
	})
	if err != nil {
		return fmt.Errorf("storing launch of %s: %w", ev.InstanceID, err)
	}
	return nil
}

// RecordTerminate stores an instance's termination time (the first one
// reported wins). known is false for an instance never launched.
func (s *Store) RecordTerminate(ctx context.Context, id string, at time.Time) (known bool, err error) {
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE instances SET terminated = coalesce(terminated, ?) WHERE instance_id = ?`, ms(at), id)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		known = n > 0
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("storing termination of %s: %w", id, err)
	}
	return known, nil
}

// Intervals returns the instances alive at some point in [from, to).
func (s *Store) Intervals(ctx context.Context, from, to time.Time) ([]budget.Interval, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT i.instance_id, coalesce(i.account,''), coalesce(j.user,''), coalesce(i.job_id,''), i.price, i.launched, i.terminated
FROM instances i LEFT JOIN jobs j ON j.job_id = i.job_id WHERE i.launched < ? AND (i.terminated IS NULL OR i.terminated >= ?)`, ms(to), ms(from))
	if err != nil {
		return nil, fmt.Errorf("reading instances: %w", err)
	}
	defer rows.Close()
	var out []budget.Interval
	for rows.Next() {
		var iv budget.Interval
		var l, t sql.NullInt64
		if err := rows.Scan(&iv.InstanceID, &iv.Account, &iv.User, &iv.JobID, &iv.PriceUSD, &l, &t); err != nil {
			return nil, fmt.Errorf("reading instances: %w", err)
		}
		iv.Start, iv.End = fromMS(l), fromMS(t)
		out = append(out, iv)
	}
	return out, rows.Err()
}
