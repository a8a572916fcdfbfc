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
	l := &learner{pol: pol, cat: cat, m: m, fams: map[string]*family{}, cache: map[learnCacheKey]sizing.Decision{},
		rep: LearningReport{Jobs: len(jobs), Model: m, LearnAfterRuns: params.DownsizeMinJobs}}
	sorted := append([]trace.Job(nil), jobs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Submit.Before(sorted[j].Submit) })
	for _, j := range sorted {
		model := j.GPUModel
		if model == "" {
			model = gpuModel
		}
		r := learnRun{job: j, model: model, maxPerNode: maxNVIDIAPerNode(cat, model), hours: j.Duration.Hours(), f: l.family(j)}
		r.nodes, r.gpn = NodeShape(j.GPUs, r.maxPerNode)
		if err := l.requestAlone(r); err != nil {
			return l.rep, err
		}
		if err := l.withHistory(r); err != nil {
			return l.rep, err
		}
	}
	if l.rep.RequestUSD > 0 {
		l.rep.SavedPct = 100 * (1 - l.rep.LearningUSD/l.rep.RequestUSD)
	}
	return l.rep, nil
}

// learner is one SimulateLearning replay: the policy, the recurring jobs
// seen so far, the decisions already made, the report.
type learner struct {
	pol   *sizing.Policy
	cat   *catalog.Catalog
	m     LearningModel
	fams  map[string]*family
	cache map[learnCacheKey]sizing.Decision
	rep   LearningReport
}

type learnCacheKey struct {
	model      string
	nodes, gpn int
	h          sizing.History
	oom        bool
}

// learnRun is one trace job as the replay sees it.
type learnRun struct {
	job        trace.Job
	model      string
	maxPerNode int
	nodes, gpn int
	hours      float64
	f          *family
}

// decide routes a request through the policy; a request the user did not
// pin (explicit false) is decided once per shape and history.
func (l *learner) decide(model string, nodes, gpn int, h sizing.History, explicit bool) (sizing.Decision, error) {
	k := learnCacheKey{model, nodes, gpn, h, h.LastOOM != nil}
	k.h.LastOOM = nil
	if !explicit {
		if d, ok := l.cache[k]; ok {
			return d, nil
		}
	}
	r := sizing.Request{GPUModel: model, GPUsPerNode: gpn, Nodes: nodes, Metadata: jobmeta.Metadata{Checkpoint: DefaultCheckpoint}}
	if explicit {
		r.Explicit = sizing.Explicit{GPUs: true, Nodes: true}
	}
	d, err := l.pol.Route(sizing.RouteInput{Request: r, History: h})
	if err == nil && !explicit {
		l.cache[k] = d
	}
	return d, err
}

// family is the job's recurring job, new ones drawn by the model (by a
// hash of their key) as underusing, running out of memory, or neither.
func (l *learner) family(j trace.Job) *family {
	key := familyKey(j)
	f := l.fams[key]
	if f != nil {
		return f
	}
	u := unitHash(key)
	f = &family{underuse: u < l.m.UnderuseShare && j.GPUs > 1, oom: u >= 1-l.m.OOMShare}
	l.fams[key] = f
	l.rep.RecurringJobs++
	if f.underuse {
		l.rep.Underusing++
	}
	if f.oom {
		l.rep.OOMing++
	}
	return f
}

// requestAlone prices the run sized from the request alone: a run that
// runs out of memory fails a tenth of the way in and is resubmitted by
// hand on twice the GPUs.
func (l *learner) requestAlone(r learnRun) error {
	asked, err := l.decide(r.model, r.nodes, r.gpn, sizing.History{}, false)
	if err != nil {
		return fmt.Errorf("job %s: %w", r.job.ID, err)
	}
	reqUSD := asked.HourlyUSD * r.hours
	reqGPUh := float64(asked.Nodes*asked.GPUsPerNode) * r.hours
	if r.f.oom {
		n2, g2 := doubled(r.nodes, r.gpn, r.maxPerNode)
		twice, err := l.decide(r.model, n2, g2, sizing.History{}, true)
		if err != nil {
			return fmt.Errorf("job %s resubmitted: %w", r.job.ID, err)
		}
		l.rep.OOMFailures++
		reqUSD = asked.HourlyUSD*r.hours*l.m.OOMFailAt + twice.HourlyUSD*r.hours
		reqGPUh = float64(asked.Nodes*asked.GPUsPerNode)*r.hours*l.m.OOMFailAt + float64(twice.Nodes*twice.GPUsPerNode)*r.hours
	}
	l.rep.RequestUSD += reqUSD
	l.rep.RequestGPUHours += reqGPUh
	return nil
}

// withHistory prices the run sized with its recurring job's history, and
// records what the agents measure of it (an out-of-memory run stays in the
// history as such).
func (l *learner) withHistory(r learnRun) error {
	f := r.f
	h := sizing.History{}
	if f.runs > 0 {
		h = sizing.History{Jobs: f.runs, GPUsAllocated: f.allocGPN, NodesAllocated: f.allocNodes, GPUMemoryMiBAllocated: f.allocGPN * f.memMiB,
			GPUsUsed: f.busyPerNode, PeakGPUMemoryMiB: f.busyPerNode * f.peakPerGPU, PeakPerGPUMiB: f.peakPerGPU,
			PeakJobGPUMemoryMiB: f.busyPerNode * f.peakPerGPU * f.allocNodes, JobGPUMemoryMiB: f.allocGPN * f.memMiB * f.allocNodes}
	}
	h.LastOOM = f.lastOOM
	d, err := l.decide(r.model, r.nodes, r.gpn, h, false)
	if err != nil {
		return fmt.Errorf("job %s with history: %w", r.job.ID, err)
	}
	if d.Downsized {
		l.rep.RunsDownsized++
	}
	if d.Upsized {
		l.rep.RunsUpsized++
	}
	learnUSD := d.HourlyUSD * r.hours
	learnGPUh := float64(d.Nodes*d.GPUsPerNode) * r.hours
	mem := memOf(l.cat, d.InstanceTypes)
	failed := f.oom && !d.Upsized
	if failed {
		// the run sized from the request fails; the history records it
		l.rep.OOMFailuresLearn++
		learnUSD = d.HourlyUSD * r.hours * l.m.OOMFailAt
		learnGPUh *= l.m.OOMFailAt
		f.lastOOM = &sizing.OOMRun{JobID: r.job.ID, Class: d.Class, Nodes: d.Nodes, GPUsPerNode: d.GPUsPerNode, GPUMemoryMiB: mem, Evidence: "synthetic OOM"}
		// ... and its user resubmits on twice the GPUs, as without learning
		n2, g2 := doubled(r.nodes, r.gpn, r.maxPerNode)
		if twice, err := l.decide(r.model, n2, g2, sizing.History{}, true); err == nil {
			learnUSD += twice.HourlyUSD * r.hours
			learnGPUh += float64(twice.Nodes*twice.GPUsPerNode) * r.hours
		}
	}
	l.rep.LearningUSD += learnUSD
	l.rep.LearningGPUHours += learnGPUh
	if !failed {
		l.measure(f, d, r.gpn, mem)
	}
	return nil
}

// measure records what the agents measure of a run that did not fail.
func (l *learner) measure(f *family, d sizing.Decision, gpn, mem int) {
	busy := d.GPUsPerNode
	if f.underuse {
		busy = max(1, int(math.Ceil(float64(gpn)*l.m.UnderuseFraction)))
		busy = min(busy, d.GPUsPerNode)
	}
	f.runs++
	f.busyPerNode, f.allocGPN, f.allocNodes, f.memMiB = busy, d.GPUsPerNode, d.Nodes, mem
	f.peakPerGPU = int(float64(mem) * l.m.PeakMemoryFraction)
	if !f.underuse {
		f.peakPerGPU = int(float64(mem) * 0.9)
	}
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
