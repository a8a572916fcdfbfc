package reconcile

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// TestKickRunsAPassNow: with an hour between passes, Kick makes Run pass
// again at once; kicks in a row merge.
func TestKickRunsAPassNow(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := New(cloudOf(nil), slurmfake.New(nil, nil), Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	runs := func() float64 {
		var m dto.Metric
		r.runs.WithLabelValues("ok").Write(&m)
		return m.GetCounter().GetValue()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx, time.Hour)
	wait := func(n float64) {
		t.Helper()
		giveUp := time.Now().Add(time.Minute) // hang guard only
		for runs() < n {
			if time.Now().After(giveUp) {
				t.Fatalf("%v passes, want %v", runs(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(1) // the first pass, at start
	r.Kick()
	wait(2)
	r.Kick()
	r.Kick()
	r.Kick()
	wait(3)
	time.Sleep(50 * time.Millisecond)
	if n := runs(); n > 4 {
		t.Errorf("three kicks in a row made %v passes", n-2)
	}
}
