package telemetry

import (
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// Tracker accumulates per-job GPU use from attributed samples and produces
// a JobSummary when the job ends. Memory is bounded per job (a 101-bucket
// utilisation histogram gives an exact p95 at 1 % resolution).
type Tracker struct {
	// Interval is the GPU-seconds one sample stands for (the sampling period).
	Interval time.Duration
	// IdleBelow: a sample under this utilisation % counts as idle; default 5.
	IdleBelow uint32
	jobs      map[uint32]*jobAcc
}

type jobAcc struct {
	start, last time.Time
	gpus        map[string]bool
	peak        uint64
	total       uint64
	hist        [101]uint64
	n           uint64
	sum         uint64
	idle        uint64
}

// NewTracker returns a Tracker for samples taken every interval.
func NewTracker(interval time.Duration, idleBelow uint32) *Tracker {
	if idleBelow == 0 {
		idleBelow = 5
	}
	return &Tracker{Interval: interval, IdleBelow: idleBelow, jobs: map[uint32]*jobAcc{}}
}

// Observe adds one tick of readings. A GPU shared by several jobs counts
// for each of them.
func (t *Tracker) Observe(readings []sizerapi.GPUReading) {
	for _, g := range readings {
		for _, id := range g.JobIDs {
			a := t.jobs[id]
			if a == nil {
				a = &jobAcc{start: g.Time, gpus: map[string]bool{}}
				t.jobs[id] = a
			}
			a.last = g.Time
			a.gpus[g.UUID] = true
			if g.MemoryUsedBytes > a.peak {
				a.peak = g.MemoryUsedBytes
			}
			a.total = max(a.total, g.MemoryTotalBytes)
			u := min(g.UtilPercent, 100)
			a.hist[u]++
			a.n++
			a.sum += uint64(u)
			if u < t.IdleBelow {
				a.idle++
			}
		}
	}
}

// Active lists the jobs being tracked.
func (t *Tracker) Active() []uint32 {
	out := make([]uint32, 0, len(t.jobs))
	for id := range t.jobs {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Finish ends job id and returns its summary; false if it was never seen.
func (t *Tracker) Finish(id uint32) (sizerapi.JobSummary, bool) {
	a := t.jobs[id]
	if a == nil {
		return sizerapi.JobSummary{}, false
	}
	delete(t.jobs, id)
	s := sizerapi.JobSummary{JobID: id, Start: a.start, End: a.last, PeakMemoryBytes: a.peak, MemoryTotalBytes: a.total}
	for u := range a.gpus {
		s.GPUs = append(s.GPUs, u)
	}
	sort.Strings(s.GPUs)
	if a.n > 0 {
		s.MeanUtilPercent = float64(a.sum) / float64(a.n)
		// nearest-rank p95
		rank := (95*a.n + 99) / 100
		var c uint64
		for u, k := range a.hist {
			c += k
			if c >= rank {
				s.P95UtilPercent = float64(u)
				break
			}
		}
	}
	sec := t.Interval.Seconds()
	s.GPUSeconds = float64(a.n) * sec
	s.IdleGPUSeconds = float64(a.idle) * sec
	return s, true
}

// FinishGone ends every job not seen since before cutoff (its processes
// left the GPUs) and returns their summaries in job order.
func (t *Tracker) FinishGone(cutoff time.Time) []sizerapi.JobSummary {
	var out []sizerapi.JobSummary
	for _, id := range t.Active() {
		if t.jobs[id].last.Before(cutoff) {
			s, _ := t.Finish(id)
			out = append(out, s)
		}
	}
	return out
}
