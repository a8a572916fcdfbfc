// Package sampler is burst-agent's sampling loop: read the GPUs, attribute
// their processes to Slurm jobs, spool a report record per tick and a job
// summary when a job leaves the node's GPUs.
package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/burst-hpc/burst/agent/attrib"
	"github.com/burst-hpc/burst/agent/gpu"
	"github.com/burst-hpc/burst/agent/gpu/sim"
	"github.com/burst-hpc/burst/agent/telemetry"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// JobResolver maps a pid to its Slurm job (an *attrib.Resolver).
type JobResolver interface {
	JobOf(pid int) (uint32, error)
	Forget(live map[int]bool)
}

// Recorder takes records (a *telemetry.Reporter).
type Recorder interface {
	Add(sizerapi.Record) error
}

// Options configure a Sampler.
type Options struct {
	// Interval between samples; default 1 s.
	Interval time.Duration
	// JobGone: a job whose processes have not been on any GPU for this
	// long has ended and gets its summary; default 30 s.
	JobGone time.Duration
	// IdleBelow is the utilisation % under which a sample counts as idle;
	// default 5.
	IdleBelow uint32
	Logger    *slog.Logger
}

// Sampler runs the loop.
type Sampler struct {
	r       gpu.Reader
	res     JobResolver
	rec     Recorder
	tracker *telemetry.Tracker
	opts    Options
	log     *slog.Logger
	live    map[int]bool
}

// New returns a Sampler.
func New(r gpu.Reader, res JobResolver, rec Recorder, o Options) *Sampler {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.JobGone <= 0 {
		o.JobGone = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Sampler{r: r, res: res, rec: rec, tracker: telemetry.NewTracker(o.Interval, o.IdleBelow), opts: o,
		log: o.Logger.With("component", "sampler"), live: map[int]bool{}}
}

// Tick samples once and records the result.
func (s *Sampler) Tick(ctx context.Context) error {
	samples, err := s.r.Sample(ctx)
	if err != nil {
		return fmt.Errorf("sampling GPUs: %w", err)
	}
	clear(s.live)
	readings := make([]sizerapi.GPUReading, len(samples))
	var now time.Time
	for i, smp := range samples {
		readings[i] = readingOf(smp)
		now = smp.Time
		for _, pid := range smp.PIDs {
			s.live[pid] = true
			id, err := s.res.JobOf(pid)
			if err != nil {
				if !errors.Is(err, attrib.ErrNoJob) {
					s.log.Debug("cannot attribute GPU process", "pid", pid, "err", err)
				}
				continue
			}
			if !slices.Contains(readings[i].JobIDs, id) {
				readings[i].JobIDs = append(readings[i].JobIDs, id)
			}
		}
	}
	s.res.Forget(s.live)
	if now.IsZero() {
		now = time.Now()
	}
	if err := s.rec.Add(sizerapi.Record{Time: now, Kind: sizerapi.KindGPU, GPUs: readings}); err != nil {
		return err
	}
	s.tracker.Observe(readings)
	for _, sum := range s.tracker.FinishGone(now.Add(-s.opts.JobGone)) {
		s.log.Info("job left the GPUs", "job", sum.JobID, "mean_util", sum.MeanUtilPercent, "p95_util", sum.P95UtilPercent,
			"peak_mem_bytes", sum.PeakMemoryBytes, "idle_gpu_seconds", sum.IdleGPUSeconds)
		if err := s.rec.Add(sizerapi.Record{Time: now, Kind: sizerapi.KindJobSummary, Summary: &sum}); err != nil {
			return err
		}
	}
	return nil
}

// Run ticks every Interval until ctx is done. A failed tick is logged
// (once per streak) and sampling goes on.
func (s *Sampler) Run(ctx context.Context) error {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	failing := false
	for {
		if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			if !failing {
				s.log.Error("sampling failed; will keep trying", "err", err)
			}
			failing = true
		} else if failing && err == nil {
			s.log.Info("sampling recovered")
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// SimPIDBase offsets the synthetic pids AssignSimJobs gives simulated GPUs.
const SimPIDBase = 1 << 30

// AssignSimJobs puts jobs on a simulated node, job i on GPU i mod n, each
// with the synthetic pid SimPIDBase+job id (which SimResolver attributes);
// GPUs without a job are idle. For demos on machines without GPUs.
func AssignSimJobs(r *sim.Reader, jobs []uint32) error {
	devs, _ := r.Devices()
	for i := range devs {
		if err := r.Assign(i, ""); err != nil {
			return err
		}
	}
	for i, id := range jobs {
		if len(devs) == 0 {
			break
		}
		if err := r.Assign(i%len(devs), fmt.Sprintf("job-%d", id), SimPIDBase+int(id)); err != nil {
			return err
		}
	}
	return nil
}

// SimResolver attributes the synthetic pids of AssignSimJobs.
type SimResolver struct{}

// JobOf implements JobResolver.
func (SimResolver) JobOf(pid int) (uint32, error) {
	if pid > SimPIDBase {
		return uint32(pid - SimPIDBase), nil
	}
	return 0, attrib.ErrNoJob
}

// Forget implements JobResolver.
func (SimResolver) Forget(map[int]bool) {}

// readingOf is a GPU sample as the sizer's wire record carries it.
func readingOf(s gpu.Sample) sizerapi.GPUReading {
	return sizerapi.GPUReading{Time: s.Time, Index: s.Index, UUID: s.UUID, Name: s.Name, UtilPercent: s.UtilPercent,
		MemoryUsedBytes: s.MemoryUsedBytes, MemoryTotalBytes: s.MemoryTotalBytes, PowerWatts: s.PowerWatts,
		TemperatureC: s.TemperatureC, PIDs: s.PIDs}
}
