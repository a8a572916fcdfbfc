package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrDeposed is returned for a leader's write after a newer leadership
// term exists: a sizer that was paused, or lost its database session while
// still running, finds on its next write that a standby leads now, and its
// write is not made.
var ErrDeposed = errors.New("this sizer no longer leads")

// Fencing: Lead hands the leader's work a context carrying its term
// (WithTerm). Every transaction the store runs under such a context first
// reads the leadership row (on PostgreSQL with FOR SHARE, so an election's
// UPDATE of that row waits for the transaction, and none of the old term
// commits after the new term does) and is refused with ErrDeposed when the
// epoch there is not the term's. The refusal also ends the term's context,
// so the deposed leader's reconciler, warm pool, SQS consumer and ledger
// stop at once, as they would at the next session check.

type fenceKey struct{}

type fence struct {
	cluster string
	epoch   int64
	stop    context.CancelFunc // ends the term (nil: nothing to end)
}

// WithTerm returns ctx carrying term t: the store's transactions under it
// are fenced by t's epoch; stop (may be nil) is called when one is refused.
func WithTerm(ctx context.Context, t Term, stop context.CancelFunc) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence{cluster: t.Cluster, epoch: t.Epoch, stop: stop})
}

// Fence checks that ctx's term (if it carries one) is still the newest: a
// leader calls it before acting outside the database (terminating an
// instance, requeueing a job, powering nodes up or down). The database's
// own writes are fenced in their transaction; this check narrows, but
// cannot close, the window in which a deposed leader acts elsewhere. It is
// a plain read (a lock taken here would end before the caller acts): a
// database another process holds locked (whose writes go to the spool)
// does not stop the leader's work.
func (s *Store) Fence(ctx context.Context) error {
	return s.fenceOn(ctx, s.r, "")
}

// checkFence is the first statement of a transaction under a term.
func (s *Store) checkFence(ctx context.Context, tx *Tx) error {
	lock := ""
	if s.driver == DriverPostgres {
		lock = ` FOR SHARE`
	}
	return s.fenceOn(ctx, tx, lock)
}

// fenceOn reads the leadership row through q (lock: the clause that holds
// it for the transaction) and refuses a term that is not the newest.
func (s *Store) fenceOn(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, lock string) error {
	f, ok := ctx.Value(fenceKey{}).(fence)
	if !ok {
		return nil
	}
	var epoch int64
	var holder string
	if err := q.QueryRowContext(ctx, `SELECT epoch, holder FROM leadership WHERE cluster = ?`+lock, f.cluster).Scan(&epoch, &holder); err != nil {
		return fmt.Errorf("checking this sizer's leadership (epoch %d): %w", f.epoch, err)
	}
	if epoch == f.epoch {
		return nil
	}
	if f.stop != nil {
		f.stop()
	}
	return fmt.Errorf("writing as the leader of epoch %d: refused, epoch %d (%s) leads now; this sizer stands by: %w", f.epoch, epoch, holder, ErrDeposed)
}

// WithTermOf returns ctx carrying the term of lead (a leader's context),
// if lead carries one: a request the leader serves for its leader-only
// work (POST /v1/ledger/sync) is fenced as that work is.
func WithTermOf(ctx, lead context.Context) context.Context {
	if f, ok := lead.Value(fenceKey{}).(fence); ok {
		return context.WithValue(ctx, fenceKey{}, f)
	}
	return ctx
}
