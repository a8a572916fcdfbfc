// Package usage keeps the month's per-job GPU usage (what each job asked
// for against what the agents measured) in memory for the dashboard's
// right-sizing: each read asks the store's usage change log
// (store.UsageChangesSince) which jobs were written since the last one and
// re-reads only those, so a read costs the same at 100,000 jobs in the
// month as at 100 once the month has been read.
package usage

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
)

// fullReadEvery is how often a Reader reads the whole month anyway
// (self-healing against anything the log missed); one whose log entries
// were pruned, or that misses more than store.MaxPending numbers, reads it
// again too.
const fullReadEvery = time.Hour

// Reader keeps the month's per-job usage. Safe for concurrent use; every
// job's usage equals a fresh read's (reader_test.go).
type Reader struct {
	st *store.Store

	mu   sync.Mutex
	c    *cache
	read int // jobs read from the store, all reads together
}

type cache struct {
	from time.Time
	log  store.Follower
	full time.Time // wall clock when the month was last read whole
	// jobs are newest first; replaced, never changed in place, so a
	// caller may keep what Month returned
	jobs []sizerapi.JobUsage
}

// NewReader returns a Reader over st.
func NewReader(st *store.Store) *Reader { return &Reader{st: st} }

// Month returns the usage of the jobs updated since the start of now's
// month (launched for then, as store.JobQuery.Since), newest first. The
// slice is shared: read it, do not change it.
func (r *Reader) Month(ctx context.Context, now time.Time) ([]sizerapi.JobUsage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refresh(ctx, billing.MonthStart(now)); err != nil {
		return nil, err
	}
	return r.c.jobs, nil
}

func (r *Reader) refresh(ctx context.Context, from time.Time) error {
	wall := time.Now()
	c := r.c
	if c == nil || !c.from.Equal(from) || wall.Sub(c.full) > fullReadEvery {
		return r.readWhole(ctx, from, wall)
	}
	mark := c.log.Mark
	ch, err := r.st.UsageChangesSince(ctx, mark, c.log.Pending())
	if err != nil {
		return err
	}
	if ch.First > mark+1 || ch.Last < mark || !c.log.Track(mark, ch.Last, ch.Seen, wall) {
		return r.readWhole(ctx, from, wall)
	}
	if len(ch.Jobs) == 0 {
		return nil
	}
	fresh, err := r.st.JobUsages(ctx, store.JobQuery{Since: from, JobIDs: ch.Jobs})
	if err != nil {
		return err
	}
	r.read += len(fresh)
	changed := make(map[string]bool, len(ch.Jobs))
	for _, id := range ch.Jobs {
		changed[id] = true
	}
	kept := make([]sizerapi.JobUsage, 0, len(c.jobs))
	for _, j := range c.jobs {
		if !changed[j.JobID] {
			kept = append(kept, j)
		}
	}
	slices.SortStableFunc(fresh, newestFirst)
	c.jobs = merge(kept, fresh)
	return nil
}

func (r *Reader) readWhole(ctx context.Context, from, wall time.Time) error {
	// the mark first: what is written while the month is read is read
	// again at the next refresh; the recent numbers not yet visible
	// (transactions in flight) are asked for again
	first, last, err := r.st.UsageChangeBounds(ctx)
	if err != nil {
		return err
	}
	low := max(last-store.MaxPending, first-1, 0)
	recent, err := r.st.UsageChangesSince(ctx, low, nil)
	if err != nil {
		return err
	}
	jobs, err := r.st.JobUsages(ctx, store.JobQuery{Since: from})
	if err != nil {
		return err
	}
	r.read += len(jobs)
	// the store's order is its collation's (PostgreSQL's may be the
	// locale's); merge needs one order
	slices.SortStableFunc(jobs, newestFirst)
	c := &cache{from: from, full: wall, jobs: jobs}
	c.log.Track(low, last, recent.Seen, wall)
	r.c = c
	return nil
}

// newestFirst orders by last update, then job id, both descending (the
// store's order).
func newestFirst(a, b sizerapi.JobUsage) int {
	if c := b.LastSeen.Compare(a.LastSeen); c != 0 {
		return c
	}
	return strings.Compare(b.JobID, a.JobID)
}

// merge merges two lists ordered newest first.
func merge(a, b []sizerapi.JobUsage) []sizerapi.JobUsage {
	out := make([]sizerapi.JobUsage, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if newestFirst(b[0], a[0]) < 0 {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	return append(append(out, a...), b...)
}
