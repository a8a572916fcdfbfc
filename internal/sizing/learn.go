package sizing

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// RecurringKey identifies a recurring job: the same user, job name and
// model metadata (jobmeta.Metadata.ModelSignature: params, workload, method,
// precision, shape, sequence and batch; not the deadline, checkpointing or
// capacity). Slurm names a job without --job-name after its script
// (basename) or "wrap", so every job has a name; cli_filter passes the
// script's name to the sizer when the user gave none.
func RecurringKey(user, jobName string, md jobmeta.Metadata) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", user, jobName, md.ModelSignature())
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// learned is what history changes in a job's plan.
type learned struct {
	down      bool    // size from measured use (smaller)
	perGPUMiB float64 // measured peak of one GPU x headroom (replicated, or no model)
	totalMiB  float64 // measured peak over the whole job x headroom (sharded, inference)
	minGPUs   int     // no model: GPUs per node they kept busy
	// after a run that ended out of GPU memory: a plan must have more
	// than these (total over the job; per GPU when nothing is sharded)
	floorTotalMiB  int
	floorPerGPUMiB int
	note           string
}

// learnFrom turns a job's history into an upsizing (after an out-of-memory
// run) and a downsizing (runs that used at most DownsizeFraction of what
// they had); either may be nil.
func (p *Policy) learnFrom(r Request, h History) (up, down *learned) {
	name := r.JobName
	if name == "" {
		name = "(unnamed)"
	}
	if o := h.LastOOM; o != nil {
		up = &learned{floorTotalMiB: o.TotalMiB(), floorPerGPUMiB: o.GPUMemoryMiB,
			note: fmt.Sprintf("your last run of %s (job %s) ended out of GPU memory on %d x %d %s GPU(s), %.0f GiB in all (%s): sized up to more GPU memory",
				name, o.JobID, max(o.Nodes, 1), max(o.GPUsPerNode, 1), o.Class, float64(o.TotalMiB())/1024, o.Evidence)}
		return up, nil
	}
	pr := p.params
	if h.Jobs < pr.DownsizeMinJobs || h.GPUsAllocated <= 0 {
		return nil, nil
	}
	lowGPUs := float64(h.GPUsUsed) <= pr.DownsizeFraction*float64(h.GPUsAllocated)
	lowMem := h.GPUMemoryMiBAllocated > 0 && float64(h.PeakGPUMemoryMiB) <= pr.DownsizeFraction*float64(h.GPUMemoryMiBAllocated)
	if !lowGPUs && !lowMem {
		return nil, nil
	}
	down = &learned{down: true, minGPUs: max(h.GPUsUsed, 1)}
	perGPU := h.PeakPerGPUMiB
	if perGPU == 0 && h.GPUsUsed > 0 {
		perGPU = h.PeakGPUMemoryMiB / h.GPUsUsed
	}
	down.perGPUMiB = float64(perGPU) * pr.LearnedHeadroom
	total := h.PeakJobGPUMemoryMiB
	if total == 0 {
		total = h.PeakGPUMemoryMiB * max(h.NodesAllocated, 1)
	}
	down.totalMiB = float64(total) * pr.LearnedHeadroom
	had := h.JobGPUMemoryMiB
	if had == 0 {
		had = h.GPUMemoryMiBAllocated * max(h.NodesAllocated, 1)
	}
	down.note = fmt.Sprintf("your last %d runs of %s used at most %d of %d GPUs per node and %.1f of %.1f GiB GPU memory (mean utilisation %.0f%%); sized for %.0f%% of that peak",
		h.Jobs, name, h.GPUsUsed, h.GPUsAllocated, float64(total)/1024, float64(had)/1024, h.MeanUtilPct, pr.LearnedHeadroom*100)
	return nil, down
}
