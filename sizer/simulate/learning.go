package simulate

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/trace"
)

// LearningModel is the stated synthetic model of what trace jobs really
// use (the Philly trace records GPUs asked for and run time, not use):
//
//   - Recurring jobs: jobs of the same GPU count, the same run-time bucket
//     (half powers of two of seconds) and the same submission day are runs
//     of one recurring job (sweeps and reruns; Philly's jobs cluster so).
//   - UnderuseShare of recurring jobs (chosen by a hash of their key) keep
//     only UnderuseFraction of the GPUs they ask for busy, and use
//     PeakMemoryFraction of each busy GPU's memory; the rest use all.
//   - OOMShare of recurring jobs need more GPU memory than their request
//     gives: a run sized from the request fails after OOMFailAt of its run
//     time and its user resubmits it on twice the GPUs (what learning does
//     automatically from the next run on).
//   - A run on fewer GPUs than asked, but at least as many as it kept
//     busy, takes as long (the other GPUs were idle).
type LearningModel struct {
	UnderuseShare      float64
	UnderuseFraction   float64
	PeakMemoryFraction float64
	OOMShare           float64
	OOMFailAt          float64
}

// DefaultLearningModel: 30% of recurring jobs keep a quarter of their GPUs
// busy at 40% memory; 2% run out of memory, failing a tenth of the way in.
func DefaultLearningModel() LearningModel {
	return LearningModel{UnderuseShare: 0.30, UnderuseFraction: 0.25, PeakMemoryFraction: 0.40, OOMShare: 0.02, OOMFailAt: 0.10}
}

// LearningReport is what learning saves over sizing from the request alone.
type LearningReport struct {
	Jobs             int     `json:"jobs"`
	RecurringJobs    int     `json:"recurring_jobs"`
	Underusing       int     `json:"underusing_recurring_jobs"`
	OOMing           int     `json:"oom_recurring_jobs"`
	RunsDownsized    int     `json:"runs_downsized"`
	RunsUpsized      int     `json:"runs_upsized"`
	OOMFailures      int     `json:"oom_failures_request_alone"`
	OOMFailuresLearn int     `json:"oom_failures_with_learning"`
	RequestUSD       float64 `json:"request_alone_usd"`
	LearningUSD      float64 `json:"with_learning_usd"`
	RequestGPUHours  float64 `json:"request_alone_gpu_hours"`
	LearningGPUHours float64 `json:"with_learning_gpu_hours"`
	SavedPct         float64 `json:"saved_pct"`
	Model            LearningModel
	LearnAfterRuns   int `json:"learn_after_runs"`
}

type family struct {
	underuse, oom bool
	runs          int // measured runs
	busyPerNode   int
	peakPerGPU    int
	allocGPN      int
	allocNodes    int
	memMiB        int
	lastOOM       *sizing.OOMRun // the run that ran out of memory; later runs keep more
}

// SimulateLearning replays jobs through the sizing policy twice: sized
// (gpuModel "" leaves the GPU model to the sizer, so a job that ran out of
// memory can move to a larger GPU)
// from the request alone, and with the history of their recurring job
// (what burst-sizer's store would hold, from the model's measurements). It
// prices both at the decisions' expected hourly prices for the runs' times.
func SimulateLearning(jobs []trace.Job, cat *catalog.Catalog, gpuModel string, m LearningModel, learnAfter int) (LearningReport, error) {
	params := sizing.DefaultParams()
	if learnAfter > 0 {
		params.DownsizeMinJobs = learnAfter
	}
	pol, err := sizing.New(cat, catalog.PriceRegion, sizing.ClassesFromCatalog(cat), params)
	if err != nil {
		return LearningReport{}, err
	}
	rep := LearningReport{Jobs: len(jobs), Model: m, LearnAfterRuns: params.DownsizeMinJobs}
	sorted := append([]trace.Job(nil), jobs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Submit.Before(sorted[j].Submit) })
	fams := map[string]*family{}
	type cacheKey struct {
		model      string
		nodes, gpn int
		h          sizing.History
		oom        bool
	}
	cache := map[cacheKey]sizing.Decision{}
	decide := func(model string, nodes, gpn int, h sizing.History, explicit bool) (sizing.Decision, error) {
		k := cacheKey{model, nodes, gpn, h, h.LastOOM != nil}
		k.h.LastOOM = nil
		if !explicit {
			if d, ok := cache[k]; ok {
				return d, nil
			}
		}
		r := sizing.Request{GPUModel: model, GPUsPerNode: gpn, Nodes: nodes, Metadata: jobmeta.Metadata{Checkpoint: DefaultCheckpoint}}
		if explicit {
			r.Explicit = sizing.Explicit{GPUs: true, Nodes: true}
		}
		d, err := pol.Route(sizing.RouteInput{Request: r, History: h})
		if err == nil && !explicit {
			cache[k] = d
		}
		return d, err
	}
	for _, j := range sorted {
		model := j.GPUModel
		if model == "" {
			model = gpuModel
		}
		mp := maxNVIDIAPerNode(cat, model)
		nodes, gpn := NodeShape(j.GPUs, mp)
		key := familyKey(j)
		f := fams[key]
		if f == nil {
			u := unitHash(key)
			f = &family{underuse: u < m.UnderuseShare && j.GPUs > 1, oom: u >= 1-m.OOMShare}
			fams[key] = f
			rep.RecurringJobs++
			if f.underuse {
				rep.Underusing++
			}
			if f.oom {
				rep.OOMing++
			}
		}
		hours := j.Duration.Hours()
		// sized from the request alone
		asked, err := decide(model, nodes, gpn, sizing.History{}, false)
		if err != nil {
			return rep, fmt.Errorf("job %s: %w", j.ID, err)
		}
		reqUSD := asked.HourlyUSD * hours
		reqGPUh := float64(asked.Nodes*asked.GPUsPerNode) * hours
		if f.oom {
			// fails a tenth of the way in, resubmitted by hand on twice the GPUs
			n2, g2 := doubled(nodes, gpn, mp)
			twice, err := decide(model, n2, g2, sizing.History{}, true)
			if err != nil {
				return rep, fmt.Errorf("job %s resubmitted: %w", j.ID, err)
			}
			rep.OOMFailures++
			reqUSD = asked.HourlyUSD*hours*m.OOMFailAt + twice.HourlyUSD*hours
			reqGPUh = float64(asked.Nodes*asked.GPUsPerNode)*hours*m.OOMFailAt + float64(twice.Nodes*twice.GPUsPerNode)*hours
		}
		rep.RequestUSD += reqUSD
		rep.RequestGPUHours += reqGPUh

		// with the recurring job's history
		h := sizing.History{}
		if f.runs > 0 {
			h = sizing.History{Jobs: f.runs, GPUsAllocated: f.allocGPN, NodesAllocated: f.allocNodes, GPUMemoryMiBAllocated: f.allocGPN * f.memMiB,
				GPUsUsed: f.busyPerNode, PeakGPUMemoryMiB: f.busyPerNode * f.peakPerGPU, PeakPerGPUMiB: f.peakPerGPU,
				PeakJobGPUMemoryMiB: f.busyPerNode * f.peakPerGPU * f.allocNodes, JobGPUMemoryMiB: f.allocGPN * f.memMiB * f.allocNodes}
		}
		h.LastOOM = f.lastOOM
		d, err := decide(model, nodes, gpn, h, false)
		if err != nil {
			return rep, fmt.Errorf("job %s with history: %w", j.ID, err)
		}
		if d.Downsized {
			rep.RunsDownsized++
		}
		if d.Upsized {
			rep.RunsUpsized++
		}
		learnUSD := d.HourlyUSD * hours
		learnGPUh := float64(d.Nodes*d.GPUsPerNode) * hours
		mem := memOf(cat, d.InstanceTypes)
		failed := false
		if f.oom && !d.Upsized {
			failed = true
			// the run sized from the request fails; the history records it
			rep.OOMFailuresLearn++
			learnUSD = d.HourlyUSD * hours * m.OOMFailAt
			learnGPUh *= m.OOMFailAt
			f.lastOOM = &sizing.OOMRun{JobID: j.ID, Class: d.Class, Nodes: d.Nodes, GPUsPerNode: d.GPUsPerNode, GPUMemoryMiB: mem, Evidence: "synthetic OOM"}
			// ... and its user resubmits on twice the GPUs, as without learning
			n2, g2 := doubled(nodes, gpn, mp)
			if twice, err := decide(model, n2, g2, sizing.History{}, true); err == nil {
				learnUSD += twice.HourlyUSD * hours
				learnGPUh += float64(twice.Nodes*twice.GPUsPerNode) * hours
			}
		}
		rep.LearningUSD += learnUSD
		rep.LearningGPUHours += learnGPUh
		// what the agents measure of this run (the OOM stays in its history)
		if !failed {
			busy := d.GPUsPerNode
			if f.underuse {
				busy = max(1, int(math.Ceil(float64(gpn)*m.UnderuseFraction)))
				busy = min(busy, d.GPUsPerNode)
			}
			f.runs++
			f.busyPerNode, f.allocGPN, f.allocNodes, f.memMiB = busy, d.GPUsPerNode, d.Nodes, mem
			f.peakPerGPU = int(float64(mem) * m.PeakMemoryFraction)
			if !f.underuse {
				f.peakPerGPU = int(float64(mem) * 0.9)
			}
		}
	}
	if rep.RequestUSD > 0 {
		rep.SavedPct = 100 * (1 - rep.LearningUSD/rep.RequestUSD)
	}
	return rep, nil
}

// maxNVIDIAPerNode is the most GPUs of a model (any NVIDIA model for "")
// one priced instance has.
func maxNVIDIAPerNode(cat *catalog.Catalog, model string) int {
	m := 0
	for _, t := range cat.All() {
		if t.NVIDIA() && t.HasPrice() && (model == "" || t.GPUModel == model) {
			m = max(m, t.GPUs)
		}
	}
	return m
}

// doubled is twice the GPUs: on the same nodes when they have room, else
// on twice the nodes.
func doubled(nodes, gpn, maxPerNode int) (int, int) {
	if gpn*2 <= maxPerNode {
		return nodes, gpn * 2
	}
	return nodes * 2, gpn
}

func memOf(cat *catalog.Catalog, types []string) int {
	m := 0
	for _, tn := range types {
		if t, ok := cat.Lookup(tn); ok && (m == 0 || t.GPUMemoryMiB < m) {
			m = t.GPUMemoryMiB
		}
	}
	return m
}

// familyKey groups a trace's jobs into recurring jobs (see LearningModel).
func familyKey(j trace.Job) string {
	bucket := int(math.Round(2 * math.Log2(math.Max(j.Duration.Seconds(), 1))))
	return fmt.Sprintf("%d/%d/%s/%s", j.GPUs, bucket, j.Submit.UTC().Format("2006-01-02"), j.Metadata)
}

func unitHash(s string) float64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return float64(h.Sum64()>>11) / float64(1<<53)
}

// FormatLearning prints the report as a short table.
func FormatLearning(r LearningReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d jobs in %d recurring jobs (synthetic model: %.0f%% keep %.0f%% of their GPUs busy, %.0f%% run out of memory); learning after %d run(s)\n",
		r.Jobs, r.RecurringJobs, 100*r.Model.UnderuseShare, 100*r.Model.UnderuseFraction, 100*r.Model.OOMShare, r.LearnAfterRuns)
	fmt.Fprintf(&b, "| sizing | cost | GPU-h billed | OOM failures |\n| --- | ---: | ---: | ---: |\n")
	fmt.Fprintf(&b, "| from the request alone | $%.0f | %.0f | %d |\n", r.RequestUSD, r.RequestGPUHours, r.OOMFailures)
	fmt.Fprintf(&b, "| with learning | $%.0f | %.0f | %d |\n", r.LearningUSD, r.LearningGPUHours, r.OOMFailuresLearn)
	fmt.Fprintf(&b, "learning saves %.1f%% (%d runs sized down, %d sized up after an out-of-memory run)\n", r.SavedPct, r.RunsDownsized, r.RunsUpsized)
	return b.String()
}
