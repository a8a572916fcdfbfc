package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// The usage change log (migrations/*/00014_usage_changes.sql): triggers on
// jobs and job_node (written with every GPU sample and summary, beside
// job_gpu) name the job each write touched, so a reader holding the
// month's per-job usage in memory (sizer/usage.Reader) re-reads only those
// jobs. Followed as the ledger's is (Follower); pruned with it.

// UsageChanges is what the usage change log holds past a reader's mark.
type UsageChanges struct {
	// Last is the newest entry's number (0: the log is empty); First the
	// oldest still kept.
	First, Last int64
	// Jobs are the jobs of this store's cluster the entries name; Seen
	// the entries' numbers (every cluster's).
	Jobs []string
	Seen []int64
}

// UsageChangesSince returns the entries after mark, and those numbered in
// pending (LedgerChangesSince says why).
func (s *Store) UsageChangesSince(ctx context.Context, mark int64, pending []int64) (UsageChanges, error) {
	var c UsageChanges
	var err error
	if c.First, c.Last, err = s.UsageChangeBounds(ctx); err != nil {
		return c, err
	}
	pb, _ := json.Marshal(append([]int64{}, pending...))
	jobs := map[string]bool{}
	err = s.each(ctx, `SELECT seq, cluster, job_id FROM usage_changes WHERE seq > ?
UNION ALL SELECT seq, cluster, job_id FROM usage_changes WHERE seq <= ? AND seq IN (SELECT CAST(value AS BIGINT) FROM json_each(?))`,
		[]any{mark, mark, string(pb)}, func(r *sql.Rows) error {
			var seq int64
			var cluster, id string
			if err := r.Scan(&seq, &cluster, &id); err != nil {
				return err
			}
			c.Seen = append(c.Seen, seq)
			if cluster == s.cluster && !jobs[id] {
				jobs[id] = true
				c.Jobs = append(c.Jobs, id)
			}
			return nil
		})
	if err != nil {
		return c, fmt.Errorf("reading the usage change log: %w", err)
	}
	return c, nil
}

// UsageChangeBounds returns the oldest and newest usage change-log numbers
// kept (0, 0: the log is empty).
func (s *Store) UsageChangeBounds(ctx context.Context) (first, last int64, err error) {
	return s.changeBounds(ctx, "usage_changes")
}
