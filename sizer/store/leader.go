package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"time"
)

// LeaderKey is the PostgreSQL advisory lock the sizers of cluster ""
// elect their leader with ("burst-sizer leader" in ASCII, folded into 63
// bits); each named cluster has its own (leaderKey).
const LeaderKey int64 = 0x62757273746c6472

// leaderKey is cluster's advisory lock: the sizers of each cluster on a
// shared database elect a leader of their own, since the reconciler, SQS
// consumer, warm pool and ledger sync act on that cluster's instances and
// Slurm.
func leaderKey(cluster string) int64 {
	if cluster == "" {
		return LeaderKey
	}
	h := fnv.New64a()
	h.Write([]byte("burst-sizer leader\x00" + cluster))
	return int64(h.Sum64() & math.MaxInt64)
}

// LeaderOptions tune Lead.
type LeaderOptions struct {
	Holder string // who this is (host and pid), recorded with the epoch
	// Cluster is the Slurm cluster (cluster.name) this sizer serves: one
	// leader per cluster, each with its own epochs.
	Cluster string
	Retry   time.Duration // how often a standby tries to lead (default 2s)
	Check   time.Duration // how often the leader checks its session (default 1s)
	Log     *slog.Logger
}

// Term is one leadership of a cluster's sizers: its epoch (one more than
// the last leader's of that cluster).
type Term struct {
	Cluster string
	Epoch   int64
	Since   time.Time
}

// Lead runs until ctx ends, calling lead each time this process becomes
// the leader, with a context that ends when the leadership does. On SQLite
// (one sizer) it leads at once and for good. On PostgreSQL the leader is
// whoever holds LeaderKey's advisory lock on a session of its own: a
// standby tries every Retry; when the leader's process dies its session
// ends and the lock with it, so a standby leads within about Retry; a
// leader whose session fails a check (every Check) stops leading at once.
// The context lead gets carries the term (WithTerm): the store refuses its
// writes once a newer term exists, and that ends the term too.
func (s *Store) Lead(ctx context.Context, o LeaderOptions, lead func(ctx context.Context, t Term)) {
	if o.Retry <= 0 {
		o.Retry = 2 * time.Second
	}
	if o.Check <= 0 {
		o.Check = time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if s.driver != DriverPostgres {
		t, err := s.newTerm(ctx, o.Cluster, o.Holder)
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if err != nil {
			o.Log.Warn("recording the leadership (this term's writes are not fenced)", "err", err)
		} else {
			lctx = WithTerm(lctx, t, cancel)
		}
		lead(lctx, t)
		<-lctx.Done()
		if ctx.Err() == nil {
			o.Log.Error("stopped leading: another sizer recorded a newer leadership on this database", "epoch", t.Epoch)
		}
		return
	}
	standing := false
	for ctx.Err() == nil {
		conn, got, err := s.tryLock(ctx, leaderKey(o.Cluster))
		switch {
		case err != nil:
			o.Log.Warn("trying to lead the sizers", "err", err)
		case !got:
			if !standing {
				o.Log.Info("standing by: another sizer leads (reconciler, warm pool, SQS consumer, ledger sync run there)", "cluster", o.Cluster)
				standing = true
			}
		default:
			standing = false
			s.term(ctx, conn, o, lead)
		}
		select {
		case <-ctx.Done():
		case <-time.After(o.Retry):
		}
	}
}

// tryLock takes a session of its own and tries the advisory lock on it.
func (s *Store) tryLock(ctx context.Context, key int64) (*sql.Conn, bool, error) {
	conn, err := s.w.DB.Conn(ctx)
	if err != nil {
		return nil, false, err
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil || !got {
		discard(conn)
		return nil, false, err
	}
	return conn, true, nil
}

// term leads until ctx ends or the session fails.
func (s *Store) term(ctx context.Context, conn *sql.Conn, o LeaderOptions, lead func(context.Context, Term)) {
	unlock := func() {
		uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn.ExecContext(uctx, `SELECT pg_advisory_unlock($1)`, leaderKey(o.Cluster))
		ucancel()
		discard(conn)
	}
	t, err := s.newTerm(ctx, o.Cluster, o.Holder)
	if err != nil {
		// no epoch, no fencing: do not lead on it
		unlock()
		o.Log.Warn("not leading: recording the leadership failed", "err", err)
		return
	}
	o.Log.Info("leading the sizers", "cluster", o.Cluster, "epoch", t.Epoch, "holder", o.Holder)
	lctx, cancel := context.WithCancel(ctx)
	lead(WithTerm(lctx, t, cancel), t)
	tick := time.NewTicker(o.Check)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			cancel()
			unlock()
			o.Log.Info("stopped leading: shutting down", "epoch", t.Epoch)
			return
		case <-lctx.Done():
			// a write of this term was refused (a newer epoch exists)
			unlock()
			o.Log.Error("stopped leading: a newer leadership exists on the database; standing by", "epoch", t.Epoch)
			return
		case <-tick.C:
			pctx, pcancel := context.WithTimeout(ctx, o.Check+time.Second)
			err := conn.PingContext(pctx)
			if err == nil {
				_, err = conn.ExecContext(pctx, `SELECT 1`)
			}
			pcancel()
			if err != nil && ctx.Err() == nil {
				cancel()
				discard(conn)
				o.Log.Error("stopped leading: the leader's database session failed; a standby takes over", "epoch", t.Epoch, "err", err)
				return
			}
		}
	}
}

// discard closes a session for good (never back into the pool, where a
// lock it held would outlive the leadership).
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

func (s *Store) newTerm(ctx context.Context, cluster, holder string) (Term, error) {
	t := Term{Cluster: cluster, Since: time.Now().UTC()}
	err := s.tx(ctx, func(tx *Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO leadership(cluster, epoch, holder, since) VALUES(?, 0, '', 0) ON CONFLICT(cluster) DO NOTHING`, cluster); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE leadership SET epoch = epoch + 1, holder = ?, since = ? WHERE cluster = ?`, holder, ms(t.Since), cluster); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT epoch FROM leadership WHERE cluster = ?`, cluster).Scan(&t.Epoch)
	})
	if err != nil {
		return t, fmt.Errorf("starting a leadership term of cluster %q: %w", cluster, err)
	}
	return t, nil
}

// Leadership is cluster's current leader as the database records it.
func (s *Store) Leadership(ctx context.Context, cluster string) (holder string, t Term, err error) {
	var since int64
	t.Cluster = cluster
	err = s.r.QueryRowContext(ctx, `SELECT holder, epoch, since FROM leadership WHERE cluster = ?`, cluster).Scan(&holder, &t.Epoch, &since)
	if errors.Is(err, sql.ErrNoRows) {
		return "", Term{Cluster: cluster}, nil
	}
	t.Since = time.UnixMilli(since).UTC()
	return holder, t, err
}
