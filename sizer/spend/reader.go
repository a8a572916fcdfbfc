package spend

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
)

// Reader reads the month's ledger and keeps it in memory between reads:
// each read asks the store's change log (store.LedgerChangesSince) what was
// written since the last one and re-reads only those instances, so a
// dashboard page or a budget check costs the same at 100,000 instances in
// the month as at 100 once the month has been read. An instance closed by
// the time it was read keeps its charges, which no later read can change
// (billing depends on now only through open segments and open runs); the
// open ones are priced at each read's now. A Reader is safe for concurrent
// use; every figure equals a fresh read's (reader_test.go).
type Reader struct {
	st *store.Store
	od OnDemandPrice

	mu   sync.Mutex
	c    *monthCache
	work Work
}

// How often a Reader reads the whole month anyway (self-healing against
// anything the log missed). The leader's ledger sync prunes the log
// (store.LedgerChangesKept); a Reader further behind reads the month
// again, as does one missing more than store.MaxPending numbers.
const fullReadEvery = time.Hour

// NewReader returns a Reader over st; od prices instances the ledger has no
// on-demand price for (nil: none).
func NewReader(st *store.Store, od OnDemandPrice) *Reader {
	return &Reader{st: st, od: od}
}

type cachedRow struct {
	row store.Row
	// closed: every segment ended and the instance terminated; its charges
	// and billed span are final.
	closed  bool
	charges []billing.Charge
	span    span
	days    []rowDay // a closed row's charges on each day (Tally)
}

// span is an instance's billed time, [lo, hi) (each segment's start to its
// start plus its billed seconds).
type span struct {
	known  bool
	lo, hi time.Time
}

type monthCache struct {
	from, to time.Time
	owner    string
	log      store.Follower // the change log's entries applied
	full     time.Time      // wall clock when the month was last read whole
	rows     []*cachedRow
	sums     *sums      // the tallies' kept sums (nil: not made yet)
	bounds   *rowBounds // of rows (nil: not made since rows changed)
}

// Month returns the ledger's view of the month containing now; owner is
// accounting.idle_owner.
func (r *Reader) Month(ctx context.Context, owner string, now time.Time) (Month, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	from := billing.MonthStart(now)
	if err := r.refresh(ctx, from, owner); err != nil {
		return Month{}, err
	}
	return r.assemble(now), nil
}

func (r *Reader) refresh(ctx context.Context, from time.Time, owner string) error {
	wall := time.Now()
	c := r.c
	if c == nil || !c.from.Equal(from) || c.owner != owner || wall.Sub(c.full) > fullReadEvery {
		return r.readWhole(ctx, from, owner, wall)
	}
	mark := c.log.Mark
	ch, err := r.st.LedgerChangesSince(ctx, mark, c.log.Pending())
	if err != nil {
		return err
	}
	if ch.First > mark+1 || ch.Last < mark {
		// entries past the mark were pruned (or the log was reset): the
		// month again
		return r.readWhole(ctx, from, owner, wall)
	}
	if !c.log.Track(mark, ch.Last, ch.Seen, wall) {
		return r.readWhole(ctx, from, owner, wall)
	}
	if ch.Empty() {
		return nil
	}
	rows, err := r.st.RowsChanged(ctx, c.from, c.to, ch)
	if err != nil {
		return err
	}
	ids, nodes := set(ch.Instances), set(ch.Nodes)
	kept := c.rows[:0:0]
	for _, cr := range c.rows {
		if !ids[cr.row.ID] && !(cr.row.Node != "" && nodes[cr.row.Node]) {
			kept = append(kept, cr)
		} else {
			c.sums.touched(c, cr)
		}
	}
	fresh := r.cache(rows, c)
	for _, cr := range fresh {
		c.sums.touched(c, cr)
	}
	sort.SliceStable(fresh, func(i, j int) bool { return less(fresh[i], fresh[j]) })
	c.rows, c.bounds = merge(kept, fresh), nil
	return nil
}

func (r *Reader) readWhole(ctx context.Context, from time.Time, owner string, wall time.Time) error {
	// the mark first: what is written while the month is read is applied
	// again at the next refresh (re-reading an instance is idempotent); the
	// recent numbers not yet visible (transactions in flight) are asked for
	// again
	first, last, err := r.st.LedgerChangeBounds(ctx)
	if err != nil {
		return err
	}
	low := max(last-store.MaxPending, first-1, 0) // what pruning left
	recent, err := r.st.LedgerChangesSince(ctx, low, nil)
	if err != nil {
		return err
	}
	c, err := r.readRows(ctx, from, owner)
	if err != nil {
		return err
	}
	c.full = wall
	c.log.Track(low, last, recent.Seen, wall)
	r.c = c
	return nil
}

// readRows reads and prices the month's ledger.
func (r *Reader) readRows(ctx context.Context, from time.Time, owner string) (*monthCache, error) {
	c := &monthCache{from: from, to: from.AddDate(0, 1, 0), owner: owner}
	rows, err := r.st.Rows(ctx, c.from, c.to)
	if err != nil {
		return nil, err
	}
	c.rows, c.bounds = r.cache(rows, c), nil
	// the store's order is its collation's (PostgreSQL's may be the
	// locale's); merge needs one order
	sort.SliceStable(c.rows, func(i, j int) bool { return less(c.rows[i], c.rows[j]) })
	return c, nil
}

// cache prices rows (sorted by launch, then id) for the month.
func (r *Reader) cache(rows []store.Row, c *monthCache) []*cachedRow {
	out := make([]*cachedRow, len(rows))
	for i, row := range rows {
		if row.OnDemandUSD <= 0 && r.od != nil {
			if p, ok := r.od(row.InstanceType); ok {
				row.OnDemandUSD = p
			}
		}
		cr := &cachedRow{row: row}
		if !row.End.IsZero() {
			bs := row.Bill(row.End)
			cr.closed = len(bs) == 0 || !bs[len(bs)-1].Open
			if cr.closed {
				cr.charges = row.Charges(c.from, c.to, row.End, c.owner)
				cr.span = billedSpan(bs)
				cr.days = dayCharges(row, cr.span, c)
			}
		}
		out[i] = cr
	}
	return out
}

func billedSpan(bs []billing.Billed) span {
	if len(bs) == 0 {
		return span{}
	}
	sp := span{known: true, lo: bs[0].Start, hi: bs[0].Start}
	for _, b := range bs {
		if b.Start.Before(sp.lo) {
			sp.lo = b.Start
		}
		if e := b.Start.Add(time.Duration(b.Seconds) * time.Second); e.After(sp.hi) {
			sp.hi = e
		}
	}
	return sp
}

// assemble is the month at now from the cache: what a fresh read at now
// (store.Rows(from, now)) would give.
func (r *Reader) assemble(now time.Time) Month {
	c := r.c
	m := Month{From: c.from, Now: now, Owner: c.owner, ByAccount: map[string]float64{}, OnDemand: map[string]float64{}, ByJob: map[string]float64{}}
	cut := now.Truncate(time.Millisecond) // the store keeps milliseconds
	m.Rows = make([]store.Row, 0, len(c.rows))
	m.charges = make([][]billing.Charge, 0, len(c.rows))
	m.spans = make([]span, 0, len(c.rows))
	var open []billing.Instance
	for _, cr := range c.rows {
		if !cr.row.Launched.Before(cut) {
			continue
		}
		row, cs, sp := cr.row, cr.charges, cr.span
		if !cr.closed || row.End.After(now) {
			row = runsBefore(row, cut)
			cs, sp = row.Charges(c.from, c.to, now, c.owner), span{}
			open = append(open, row.Instance)
		}
		m.Rows = append(m.Rows, row)
		m.charges = append(m.charges, cs)
		m.spans = append(m.spans, sp)
		for _, ch := range cs {
			m.Charges = append(m.Charges, ch)
			m.ByAccount[ch.Account] += ch.USD
			m.OnDemand[ch.Account] += ch.OnDemandUSD
			if ch.JobID != "" {
				m.ByJob[ch.JobID] += ch.USD
			}
		}
	}
	m.Burn = billing.Burn(open, now, c.owner)
	return m
}

// runsBefore is the row with only the job runs that started before cut (a
// fresh read at now reads no later one).
func runsBefore(row store.Row, cut time.Time) store.Row {
	var runs []billing.Run
	for _, run := range row.Runs {
		if run.Start.Before(cut) {
			runs = append(runs, run)
		}
	}
	if len(runs) != len(row.Runs) {
		row.Runs = runs
	}
	return row
}

// merge merges two lists sorted by launch then id.
func merge(a, b []*cachedRow) []*cachedRow {
	out := make([]*cachedRow, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if less(b[0], a[0]) {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	return append(append(out, a...), b...)
}

func less(x, y *cachedRow) bool {
	if !x.row.Launched.Equal(y.row.Launched) {
		return x.row.Launched.Before(y.row.Launched)
	}
	return x.row.ID < y.row.ID
}

func set(xs []string) map[string]bool {
	out := make(map[string]bool, len(xs))
	for _, x := range xs {
		out[x] = true
	}
	return out
}
