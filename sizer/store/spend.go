package store

import (
	"context"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/burst-hpc/burst/internal/sizerapi"
)

func (s *Store) upsertJob(ctx context.Context, tx *Tx, j sizerapi.Job, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO jobs(cluster, job_id, job_name, user, account, class, gpu_model, gpus_per_node, nodes, gpu_mem_mib, updated) VALUES(?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT(cluster, job_id) DO UPDATE SET job_name=excluded.job_name, user=excluded.user, account=excluded.account, class=excluded.class, gpu_model=excluded.gpu_model,
gpus_per_node=excluded.gpus_per_node, nodes=max(nodes, excluded.nodes), gpu_mem_mib=excluded.gpu_mem_mib, updated=excluded.updated`,
		s.cluster, j.JobID, j.JobName, j.User, j.Account, j.Class, j.GPUModel, j.GPUsPerNode, max(j.Nodes, 1), j.GPUMemoryMiB, ms(now))
	return err
}

// UpsertJob records a job's owner and allocation.
func (s *Store) UpsertJob(ctx context.Context, j sizerapi.Job, now time.Time) error {
	if err := s.tx(ctx, func(tx *Tx) error { return s.upsertJob(ctx, tx, j, now) }); err != nil {
		return fmt.Errorf("storing job %s: %w", j.JobID, err)
	}
	return nil
}

// RecordLaunch stores an instance launch reported by burst-resume at
// price USD/hour (and its job, if given). A repeated launch of the same
// instance keeps the first launch time.
func (s *Store) RecordLaunch(ctx context.Context, ev sizerapi.InstanceEvent, price float64) error {
	return s.RecordInstance(ctx, Launch{Event: ev, PriceUSD: price, PriceSource: PriceResume, Source: "resume"})
}

// RecordTerminate stores a termination at burst's clock (see RecordEnd).
func (s *Store) RecordTerminate(ctx context.Context, id string, at time.Time) (known bool, err error) {
	return s.RecordEnd(ctx, id, at, sizerapi.SourceBurst, "")
}
