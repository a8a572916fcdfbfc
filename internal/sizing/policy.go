// Package sizing is burst's sizing policy: from what a job requests and says
// about itself (metadata), the EC2 catalog's prices and spot risk, offerings
// known to be unavailable, what similar past jobs used and the account's
// budget, it chooses a node class at submission (Route) and ranks offerings
// within a class at resume (Rank).
//
// The package is pure: no I/O and no clock. Everything it needs, including
// history and budget figures, is passed in; the same functions serve
// `burst-sizer route`, the sizer daemon's rank API, burst-resume's in-process
// fallback and the simulator.
//
// Models (each documented where it is defined):
//   - GPU memory (memory.go): weights, gradients, optimizer state and
//     activations for full, LoRA and QLoRA training, sharded (ZeRO-1/2/3,
//     FSDP) over every GPU of every node or replicated; weights plus KV
//     cache for inference; layer shapes from a table of known architectures
//     (arch.go).
//   - run time: FLOPsPerParamToken x params x tokens at PerfOf(model)'s peak
//     x MFU x the data-parallel scaling efficiency (scaling.go); inference
//     decode from memory bandwidth (inference.go).
//   - scale-out (plan.go): nodes x GPUs up to a class's max_nodes, the
//     cheapest plan that meets the deadline (or latency/throughput target).
//   - spot risk: SpotRiskFactor, 1 + λ·nodes·(C/2 + R).
//   - learning (learn.go): from what past runs of the same recurring job
//     (RecurringKey) really used: smaller when they used at most
//     Params.DownsizeFraction of what they had, larger after a run that
//     ended out of GPU memory.
package sizing

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/jobmeta"
)

// Class is a node class as the admin defines it: a Slurm node feature
// (constraint) backed by instance types that all carry GPUsPerNode GPUs of
// GPUModel.
type Class struct {
	Name          string        // class name; also the Slurm feature unless Feature is set
	Feature       string        // Slurm node feature for --constraint; "" means Name
	Partition     string        // Slurm partition the class's nodes are in; "" leaves the job's
	GPUModel      string        // GRES type, e.g. "a100"
	GPUsPerNode   int           // GPUs per node
	MaxNodes      int           // most nodes of this class one job may use; 0 means MaxScanNodes
	InstanceTypes []string      // EC2 types that can back a node, in admin order
	Capacity      capacity.Type // spot, on-demand or spot-then-on-demand ("" means spot-then-on-demand)
	// Partitions are every Slurm partition that holds the class (Partition
	// is the first); an explicit --partition only gets classes it holds.
	Partitions []string
	// MaxTime is the smallest MaxTime of those partitions (0: unlimited);
	// a decision whose estimate is longer warns.
	MaxTime time.Duration
	// NoEFA: the class's launches attach no EFA interfaces (the admin's
	// own launch template decides its network interfaces), so the planner
	// counts TCP over one network card between its nodes.
	NoEFA bool
}

// MaxScanNodes bounds the nodes the planner tries in a class without max_nodes.
const MaxScanNodes = 64

func (c Class) maxNodes() int {
	if c.MaxNodes > 0 {
		return c.MaxNodes
	}
	return MaxScanNodes
}

func (c Class) inPartition(p string) bool {
	if p == "" || len(c.Partitions) == 0 && c.Partition == "" {
		return true
	}
	if c.Partition == p {
		return true
	}
	for _, q := range c.Partitions {
		if q == p {
			return true
		}
	}
	return false
}

// Constraint is the Slurm feature the class's nodes carry.
func (c Class) Constraint() string {
	if c.Feature != "" {
		return c.Feature
	}
	return c.Name
}

// Request is a job as Slurm sees it, plus its parsed metadata.
//
// What the user asked for explicitly (Explicit) is kept: GPUs per node and
// GPU type (--gres, --gpus, --gpus-per-node), nodes (--nodes) and
// partition (--partition). Fields given but not marked explicit are
// minimums (the simulator and older callers use them so).
type Request struct {
	JobName          string
	User             string
	Account          string
	Partition        string
	GPUModel         string        // GRES type requested ("" any)
	GPUsPerNode      int           // GPUs per node requested (GRES count, or --gpus / nodes)
	Nodes            int           // nodes requested; 0 means 1
	Explicit         Explicit      // which of the above the user set
	CPUsPerNode      int           // 0 means any
	MemoryMiBPerNode int           // 0 means any
	TimeLimit        time.Duration // --time; 0 when not given
	NoRequeue        bool          // --no-requeue: the job must not be interrupted
	Metadata         jobmeta.Metadata
}

// Explicit marks what the user set on the command line.
type Explicit struct {
	GPUs      bool // --gres/--gpus/--gpus-per-node: GPUsPerNode and GPUModel
	Nodes     bool // --nodes
	Partition bool // --partition
}

// Any reports whether anything was explicit.
func (e Explicit) Any() bool { return e.GPUs || e.Nodes || e.Partition }

func (e Explicit) names() []string {
	var out []string
	if e.GPUs {
		out = append(out, "gpus")
	}
	if e.Nodes {
		out = append(out, "nodes")
	}
	if e.Partition {
		out = append(out, "partition")
	}
	return out
}

func (r Request) nodes() int {
	if r.Nodes < 1 {
		return 1
	}
	return r.Nodes
}

// History summarises what past runs of the same recurring job (user, job
// name and model metadata: RecurringKey) used, as burst-agent measured them
// through NVML. Only real GPUs count (simulated reports are ignored unless
// the sizer is a test stack).
type History struct {
	Key                   string  // RecurringKey of the job
	Jobs                  int     // past runs with utilisation reports
	GPUsAllocated         int     // GPUs per node they were given (largest)
	NodesAllocated        int     // nodes they were given (largest)
	GPUMemoryMiBAllocated int     // GPU memory per node they were given (largest)
	GPUsUsed              int     // most GPUs per node any of them kept busy
	PeakGPUMemoryMiB      int     // most GPU memory per node any of them used
	PeakPerGPUMiB         int     // most memory any one GPU of theirs used
	PeakJobGPUMemoryMiB   int     // most memory one run used over all its nodes
	JobGPUMemoryMiB       int     // GPU memory that run had over all its nodes
	MeanUtilPct           float64 // mean GPU utilisation over their GPUs, 0-100
	// LastOOM is the most recent run when it ended out of GPU memory
	// (nil otherwise): the next run gets more memory than it had.
	LastOOM *OOMRun
}

// OOMRun is a run that ended out of GPU memory, and what it had.
type OOMRun struct {
	JobID        string
	Class        string
	Nodes        int
	GPUsPerNode  int
	GPUMemoryMiB int    // per GPU
	Evidence     string // what showed it: the job's output, exit code, NVML
}

// TotalMiB is the GPU memory the run had over all its GPUs.
func (o OOMRun) TotalMiB() int { return max(o.Nodes, 1) * max(o.GPUsPerNode, 1) * o.GPUMemoryMiB }

// Budget is an account's monthly cap and spend so far. CapUSD 0 means no cap.
type Budget struct {
	Account  string
	CapUSD   float64
	SpentUSD float64
}

// Over reports whether the account has used up its budget.
func (b Budget) Over() bool { return b.CapUSD > 0 && b.SpentUSD >= b.CapUSD }

// Unavailable marks offerings not to use (no capacity, recently interrupted).
// Empty Zone matches every zone; empty Capacity matches spot and on-demand.
type Unavailable struct {
	InstanceType string
	Zone         string
	Capacity     capacity.Type
	Reason       string
}

func (u Unavailable) matches(typ, zone string, c capacity.Type) bool {
	return u.InstanceType == typ && (u.Zone == "" || u.Zone == zone) && (u.Capacity == capacity.Any || u.Capacity == c)
}

// Params are the policy's tunables. DefaultParams gives the documented values.
type Params struct {
	RelaunchOverhead        time.Duration // R in SpotRiskFactor: boot + requeue + restore after an interruption
	UsableGPUMemoryFraction float64       // share of each GPU's memory a job can use
	DownsizeMinJobs         int           // past runs needed before learning sizes a job down
	DownsizeFraction        float64       // downsize when use <= this share of allocation
	LearnedHeadroom         float64       // multiply observed peak memory by this when sizing from history
	// RewriteExplicit lets the sizer replace what the user asked for
	// explicitly (GPUs, nodes, partition) with a cheaper plan that fits
	// (burst.yaml sizing.rewrite_explicit). Off: the cheaper plan is only
	// suggested in the decision's message.
	RewriteExplicit bool
	// LongRun: without a deadline, an estimate longer than this (or the
	// partition's MaxTime) warns. Default 30 days.
	LongRun time.Duration
}

// DefaultParams: 10 minute relaunch, 90% usable GPU memory, learning after 2
// runs that used at most half of what they had, with 25% memory headroom;
// explicit requests are kept; a warning past 30 days.
func DefaultParams() Params {
	return Params{RelaunchOverhead: 10 * time.Minute, UsableGPUMemoryFraction: 0.9, DownsizeMinJobs: 2, DownsizeFraction: 0.5, LearnedHeadroom: 1.25, LongRun: 30 * 24 * time.Hour}
}

// Policy holds the static inputs: catalog, region and classes.
type Policy struct {
	cat     *catalog.Catalog
	region  string
	classes []Class
	params  Params
	byName  map[string]int
}

// Errors callers can test for.
var (
	ErrNoClass      = errors.New("no node class fits the job")
	ErrUnknownClass = errors.New("unknown node class")
)

// New validates the classes against the catalog and returns a Policy. Every
// problem is reported (joined), each naming the class.
func New(cat *catalog.Catalog, region string, classes []Class, params Params) (*Policy, error) {
	if cat == nil {
		return nil, errors.New("creating policy: nil catalog")
	}
	if params == (Params{}) {
		params = DefaultParams()
	}
	if params.LongRun == 0 {
		params.LongRun = 30 * 24 * time.Hour
	}
	p := &Policy{cat: cat, region: region, params: params, byName: map[string]int{}}
	var errs []error
	for i, c := range classes {
		if c.Name == "" {
			errs = append(errs, fmt.Errorf("classes[%d]: name is empty", i))
			continue
		}
		if _, dup := p.byName[c.Name]; dup {
			errs = append(errs, fmt.Errorf("classes[%d] %q: duplicate class name", i, c.Name))
			continue
		}
		switch c.Capacity {
		case capacity.Any, capacity.Spot, capacity.OnDemand, capacity.SpotThenOnDemand:
		default:
			errs = append(errs, fmt.Errorf("class %q: capacity %q is not spot, on-demand or spot-then-on-demand", c.Name, c.Capacity))
		}
		if len(c.InstanceTypes) == 0 {
			errs = append(errs, fmt.Errorf("class %q: no instance types; list at least one, e.g. p4d.24xlarge", c.Name))
		}
		for _, tn := range c.InstanceTypes {
			t, ok := cat.Lookup(tn)
			if !ok {
				errs = append(errs, fmt.Errorf("class %q: instance type %q is not in the catalog", c.Name, tn))
				continue
			}
			if !t.NVIDIA() || !strings.EqualFold(t.GPUModel, c.GPUModel) || t.GPUs != c.GPUsPerNode {
				errs = append(errs, fmt.Errorf("class %q: instance type %s has %d x %s GPUs, class says %d x %s", c.Name, tn, t.GPUs, t.GPUModel, c.GPUsPerNode, c.GPUModel))
			}
			if !t.HasPrice() {
				errs = append(errs, fmt.Errorf("class %q: instance type %s has no on-demand price in the catalog", c.Name, tn))
			}
		}
		c.InstanceTypes = append([]string(nil), c.InstanceTypes...)
		p.byName[c.Name] = len(p.classes)
		p.classes = append(p.classes, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("creating policy: %w", err)
	}
	return p, nil
}

// Classes returns the policy's classes.
func (p *Policy) Classes() []Class { return append([]Class(nil), p.classes...) }

// Class looks a class up by name.
func (p *Policy) Class(name string) (Class, bool) {
	i, ok := p.byName[name]
	if !ok {
		return Class{}, false
	}
	return p.classes[i], true
}

// ClassesFromCatalog derives one class per (GPU model, GPUs per instance) from
// the catalog's priced NVIDIA types, named "<model>-<n>x" (e.g. "a100-8x"),
// each listing its types cheapest first. Used by the simulator and when
// burst.yaml defines no classes.
func ClassesFromCatalog(cat *catalog.Catalog) []Class {
	type key struct {
		model string
		n     int
		mem   int
	}
	groups := map[key][]catalog.InstanceType{}
	var keys []key
	for _, t := range cat.All() {
		if !t.NVIDIA() || !t.HasPrice() || t.GPUs < 1 {
			continue
		}
		k := key{t.GPUModel, t.GPUs, t.GPUMemoryMiB}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], t)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].model != keys[j].model {
			return keys[i].model < keys[j].model
		}
		if keys[i].n != keys[j].n {
			return keys[i].n < keys[j].n
		}
		return keys[i].mem < keys[j].mem
	})
	var out []Class
	names := map[string]int{}
	for _, k := range keys {
		ts := groups[k]
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].OnDemandUSD < ts[j].OnDemandUSD })
		name := fmt.Sprintf("%s-%dx", k.model, k.n)
		names[name]++
		if names[name] > 1 {
			name = fmt.Sprintf("%s-%dgb-%dx", k.model, k.mem/1024, k.n)
		}
		c := Class{Name: name, GPUModel: k.model, GPUsPerNode: k.n, Capacity: capacity.SpotThenOnDemand}
		for _, t := range ts {
			c.InstanceTypes = append(c.InstanceTypes, t.Name)
		}
		out = append(out, c)
	}
	return out
}

// spotOf returns the spot data for a type in the policy's region, falling
// back to the catalog's default region.
func (p *Policy) spotOf(t catalog.InstanceType) (catalog.Spot, bool) {
	if p.region != "" {
		if s, ok := p.cat.SpotIn(p.region, t.Name); ok {
			return s, s.Bucket != catalog.InterruptUnknown
		}
	}
	return t.Spot, t.HasSpot()
}

// capacities returns the capacities a job may use in a class, and why spot is
// excluded when it is.
func capacities(c Class, r Request) ([]capacity.Type, string) {
	md := r.Metadata
	var forceOD string
	switch {
	case r.NoRequeue:
		forceOD = "the job cannot be requeued (--no-requeue)"
	case md.Capacity == capacity.OnDemand:
		forceOD = "the job asks for capacity=on-demand"
	case md.NoCheckpoint:
		forceOD = "the job cannot checkpoint (checkpoint=none), so an interruption would lose all its work"
	}
	switch c.Capacity {
	case capacity.OnDemand:
		if md.Capacity == capacity.Spot {
			return nil, "the job asks for spot and the class is on-demand only"
		}
		return []capacity.Type{capacity.OnDemand}, "the class is on-demand only"
	case capacity.Spot:
		if forceOD != "" {
			return nil, forceOD + " and the class is spot only"
		}
		return []capacity.Type{capacity.Spot}, ""
	default:
		if forceOD != "" {
			return []capacity.Type{capacity.OnDemand}, forceOD
		}
		if md.Capacity == capacity.Spot {
			return []capacity.Type{capacity.Spot}, ""
		}
		return []capacity.Type{capacity.Spot, capacity.OnDemand}, ""
	}
}
