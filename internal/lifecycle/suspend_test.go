package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/cloud/cloudfake"
)

// throttling is the fake provider whose first n Terminate calls EC2
// throttles.
type throttling struct {
	*cloudfake.Provider
	n, calls int
}

func (t *throttling) Terminate(ctx context.Context, nodes []string) ([]cloud.Instance, error) {
	t.calls++
	if t.calls <= t.n {
		return nil, &cloud.Error{Kind: cloud.KindThrottled, Code: "RequestLimitExceeded", Op: "terminating instances"}
	}
	return t.Provider.Terminate(ctx, nodes)
}

// TestSuspendRetriesThrottledTerminate: a terminate EC2 throttles (after
// the SDK's own attempts) is retried with doubling waits within
// SuspendThrottleBudget; past the budget the error is returned and the
// instance is left to the reconciler.
func TestSuspendRetriesThrottledTerminate(t *testing.T) {
	for _, c := range []struct {
		name      string
		throttled int
		wantWaits []time.Duration
		wantGone  int
	}{
		{"two storms", 2, []time.Duration{2 * time.Second, 4 * time.Second}, 1},
		{"past the budget", 100, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fp := cloudfake.New("demo")
			fp.Add(cloud.Instance{ID: "i-1", Node: "l4-1", InstanceType: "g6.xlarge", State: "running"})
			tp := &throttling{Provider: fp, n: c.throttled}
			var waits []time.Duration
			s := &Suspender{Cloud: tp, Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
			gone, err := s.Suspend(context.Background(), "l4-1")
			if len(gone) != c.wantGone {
				t.Errorf("terminated %d instances, want %d", len(gone), c.wantGone)
			}
			if c.wantGone == 1 && err != nil {
				t.Errorf("err = %v after the storm passed", err)
			}
			if c.wantGone == 0 && !errors.Is(err, cloud.ErrThrottled) {
				t.Errorf("err = %v, want the throttling error once the budget is spent", err)
			}
			// waits 2+4+8+16 = 30 s; the next (32 s) would pass the 60 s budget
			if len(waits) != len(c.wantWaits) {
				t.Fatalf("waits %v, want %v", waits, c.wantWaits)
			}
			for i := range waits {
				if waits[i] != c.wantWaits[i] {
					t.Errorf("waits %v, want %v", waits, c.wantWaits)
				}
			}
		})
	}
}
