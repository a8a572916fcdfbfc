package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// The ledger's change log (migrations/*/00009_ledger_changes.sql): triggers
// on instances, instance_states and job_runs name what each write touched,
// so a reader holding the month in memory (sizer/spend.Reader) re-reads
// only that.

// LedgerChanges is what the change log holds past a reader's mark.
type LedgerChanges struct {
	// Last is the newest entry's number (0: the log is empty); First the
	// oldest still kept (older ones were pruned).
	First, Last int64
	// Instances and Nodes are what the entries name; Seen their numbers.
	Instances, Nodes []string
	Seen             []int64
}

// Empty says no entry was found.
func (c LedgerChanges) Empty() bool { return len(c.Instances) == 0 && len(c.Nodes) == 0 }

// LedgerChangesSince returns the entries after mark, and those numbered in
// pending: on PostgreSQL an entry's number is taken when its transaction
// writes it, so a transaction that commits late lands below a mark a
// reader already passed; the reader keeps the numbers it has not seen
// below its mark (LedgerChanges.Seen says which it got) and asks again.
func (s *Store) LedgerChangesSince(ctx context.Context, mark int64, pending []int64) (LedgerChanges, error) {
	var c LedgerChanges
	var err error
	if c.First, c.Last, err = s.LedgerChangeBounds(ctx); err != nil {
		return c, err
	}
	pb, _ := json.Marshal(append([]int64{}, pending...))
	ids, nodes := map[string]bool{}, map[string]bool{}
	// two lookups by number, not one OR (which reads the whole log)
	err = s.each(ctx, `SELECT seq, coalesce(instance_id,''), coalesce(node,'') FROM ledger_changes WHERE seq > ?
UNION ALL SELECT seq, coalesce(instance_id,''), coalesce(node,'') FROM ledger_changes WHERE seq <= ? AND seq IN (SELECT CAST(value AS BIGINT) FROM json_each(?))`,
		[]any{mark, mark, string(pb)}, func(r *sql.Rows) error {
			var seq int64
			var id, node string
			if err := r.Scan(&seq, &id, &node); err != nil {
				return err
			}
			c.Seen = append(c.Seen, seq)
			if id != "" && !ids[id] {
				ids[id] = true
				c.Instances = append(c.Instances, id)
			}
			if node != "" && !nodes[node] {
				nodes[node] = true
				c.Nodes = append(c.Nodes, node)
			}
			return nil
		})
	if err != nil {
		return c, fmt.Errorf("reading the ledger's change log: %w", err)
	}
	return c, nil
}

// LedgerChangeBounds returns the oldest and newest change-log numbers kept
// (0, 0: the log is empty).
func (s *Store) LedgerChangeBounds(ctx context.Context) (first, last int64, err error) {
	return s.changeBounds(ctx, "ledger_changes")
}

// changeBounds returns a change log's oldest and newest numbers kept.
func (s *Store) changeBounds(ctx context.Context, table string) (first, last int64, err error) {
	var f, l sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT (SELECT min(seq) FROM `+table+`), (SELECT max(seq) FROM `+table+`)`).Scan(&f, &l); err != nil {
		return 0, 0, fmt.Errorf("reading the change log %s: %w", table, err)
	}
	return f.Int64, l.Int64, nil
}

// LedgerChangesKept is how long the change logs (the ledger's and the
// usage's) keep an entry: the leader's ledger sync prunes older ones.
const LedgerChangesKept = 24 * time.Hour

// RowsChanged is Rows narrowed to the instances a change log names: those
// with one of its ids or on one of its nodes.
func (s *Store) RowsChanged(ctx context.Context, from, to time.Time, c LedgerChanges) ([]Row, error) {
	ids, _ := json.Marshal(append([]string{}, c.Instances...))
	nodes, _ := json.Marshal(append([]string{}, c.Nodes...))
	return s.rows(ctx, from, to, &rowsOf{ids: string(ids), nodes: string(nodes)})
}

// PruneChangeLogs deletes the change logs' entries (the ledger's and the
// usage's) written before before; it returns how many went.
func (s *Store) PruneChangeLogs(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *Tx) error {
		for _, table := range changeLogTables {
			res, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE at < ?`, ms(before))
			if err != nil {
				return err
			}
			k, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += k
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pruning the change logs: %w", err)
	}
	return n, nil
}
