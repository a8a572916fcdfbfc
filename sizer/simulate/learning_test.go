package simulate

import (
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/sizer/trace"
)

func runsOf(n, gpus int, d time.Duration) []trace.Job {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	var out []trace.Job
	for i := 0; i < n; i++ {
		out = append(out, trace.Job{ID: string(rune('a' + i)), Submit: t0.Add(time.Duration(i) * time.Hour), Duration: d, GPUs: gpus})
	}
	return out
}

// TestLearningDownsizesAfterNRuns: 5 runs of an 8-GPU recurring job that
// keeps 2 GPUs busy: the first 2 are sized from the request, the next 3
// from what the first runs used.
func TestLearningDownsizesAfterNRuns(t *testing.T) {
	m := DefaultLearningModel()
	m.UnderuseShare, m.OOMShare = 1, 0
	rep, err := SimulateLearning(runsOf(5, 8, 2*time.Hour), catalog.Default(), "a10g", m, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(FormatLearning(rep))
	if rep.RecurringJobs != 1 || rep.RunsDownsized != 3 || rep.RunsUpsized != 0 || rep.OOMFailures != 0 {
		t.Errorf("report %+v", rep)
	}
	// 5 runs x 2 h x 8 GPUs asked; learning: 2 runs at 8, then 3 on the
	// smallest A10G instance with the ceil(8 x 0.25) = 2 busy GPUs: g5.12xlarge, 4
	if rep.RequestGPUHours != 5*2*8 || rep.LearningGPUHours != 2*2*8+3*2*4 || rep.LearningUSD >= rep.RequestUSD || rep.SavedPct <= 0 {
		t.Errorf("GPU-hours %v -> %v, $%.2f -> $%.2f", rep.RequestGPUHours, rep.LearningGPUHours, rep.RequestUSD, rep.LearningUSD)
	}
}

// TestLearningUpsizesAfterOOM: every run sized from the request runs out
// of memory a tenth of the way in and is resubmitted on twice the GPUs;
// with learning only the first run does.
func TestLearningUpsizesAfterOOM(t *testing.T) {
	m := DefaultLearningModel()
	m.UnderuseShare, m.OOMShare = 0, 1
	rep, err := SimulateLearning(runsOf(4, 1, time.Hour), catalog.Default(), "", m, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(FormatLearning(rep))
	if rep.OOMFailures != 4 || rep.OOMFailuresLearn != 1 || rep.RunsUpsized != 3 {
		t.Errorf("report %+v", rep)
	}
	if rep.LearningUSD >= rep.RequestUSD {
		t.Errorf("learning cost $%.2f, request alone $%.2f", rep.LearningUSD, rep.RequestUSD)
	}
}
