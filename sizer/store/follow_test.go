package store

import (
	"testing"
	"time"
)

// TestFollowerPending: numbers below the mark a read did not see are
// asked for again until they appear or are older than PendingFor.
func TestFollowerPending(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	var f Follower
	if !f.Track(0, 5, []int64{1, 2, 4, 5}, t0) {
		t.Fatal("Track refused a small gap")
	}
	if f.Mark != 5 || len(f.pending) != 1 || f.pending[3].IsZero() {
		t.Fatalf("after 1,2,4,5: mark %d, pending %v; want 5 and {3}", f.Mark, f.pending)
	}
	f.Track(5, 7, []int64{3, 7}, t0.Add(time.Second))
	if f.Mark != 7 || len(f.pending) != 1 || f.pending[6].IsZero() {
		t.Fatalf("after 3,7: mark %d, pending %v; want 7 and {6}", f.Mark, f.pending)
	}
	if p := f.Pending(); len(p) != 1 || p[0] != 6 {
		t.Fatalf("pending %v, want [6]", p)
	}
	f.Track(7, 7, nil, t0.Add(PendingFor+2*time.Second))
	if len(f.pending) != 0 {
		t.Fatalf("a number pending longer than %s is still asked for: %v", PendingFor, f.pending)
	}
	if f.Track(7, 7+2*MaxPending, nil, t0) {
		t.Error("Track accepted more missing numbers than MaxPending")
	}
}
