package store

import "time"

// Following a change log (ledger_changes, usage_changes): a reader keeps
// the newest entry it applied (its mark) and re-reads what later entries
// name. On PostgreSQL an entry's number is taken when its transaction
// writes it, so a transaction that commits late lands below a mark a
// reader already passed; the reader keeps the numbers below its mark it
// has not seen (a transaction that rolled back leaves its number unused
// for good) and asks for them again for a while.

// How long a Follower keeps asking for a number below its mark that it
// has not seen, and how many such numbers it tracks before its reader
// reads everything again instead.
const (
	PendingFor = 2 * time.Minute
	MaxPending = 10000
)

// Follower is a reader's position in a change log. The zero value has
// seen nothing.
type Follower struct {
	Mark    int64               // the newest entry applied
	pending map[int64]time.Time // numbers below Mark not seen yet, since when
}

// Track notes which numbers from from+1 to last a read saw (seen), keeping
// those missing (and not older than PendingFor) to ask for again; false:
// too many missing, read everything again.
func (f *Follower) Track(from, last int64, seen []int64, wall time.Time) bool {
	if f.pending == nil {
		f.pending = map[int64]time.Time{}
	}
	got := make(map[int64]bool, len(seen))
	for _, n := range seen {
		got[n] = true
	}
	for n, since := range f.pending {
		if got[n] || wall.Sub(since) > PendingFor {
			delete(f.pending, n)
		}
	}
	f.Mark = max(f.Mark, last)
	for n := from + 1; n <= last; n++ {
		if !got[n] {
			if len(f.pending) == MaxPending {
				return false
			}
			f.pending[n] = wall
		}
	}
	return true
}

// Pending are the numbers below the mark still asked for.
func (f *Follower) Pending() []int64 {
	out := make([]int64, 0, len(f.pending))
	for n := range f.pending {
		out = append(out, n)
	}
	return out
}
