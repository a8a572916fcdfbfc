package spend

import (
	"testing"
	"time"

	"github.com/burst-hpc/burst/sizer/store"
)

// TestTrackPending: numbers below the mark a read did not see are asked
// for again until they appear or are older than pendingFor.
func TestTrackPending(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	c := &monthCache{pending: map[int64]time.Time{}}
	if !c.track(0, store.LedgerChanges{Last: 5, Seen: []int64{1, 2, 4, 5}}, t0) {
		t.Fatal("track refused a small gap")
	}
	if c.mark != 5 || len(c.pending) != 1 || c.pending[3].IsZero() {
		t.Fatalf("after 1,2,4,5: mark %d, pending %v; want 5 and {3}", c.mark, c.pending)
	}
	c.track(5, store.LedgerChanges{Last: 7, Seen: []int64{3, 7}}, t0.Add(time.Second))
	if c.mark != 7 || len(c.pending) != 1 || c.pending[6].IsZero() {
		t.Fatalf("after 3,7: mark %d, pending %v; want 7 and {6}", c.mark, c.pending)
	}
	c.track(7, store.LedgerChanges{Last: 7}, t0.Add(pendingFor+2*time.Second))
	if len(c.pending) != 0 {
		t.Fatalf("a number pending longer than %s is still asked for: %v", pendingFor, c.pending)
	}
	if c.track(7, store.LedgerChanges{Last: 7 + 2*maxPending}, t0) {
		t.Error("track accepted more missing numbers than maxPending")
	}
}
