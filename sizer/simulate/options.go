package simulate

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/warmpool/forecast"
	"github.com/burst-hpc/burst/sizer/trace"
)

// Policy names.
const (
	PolicyStatic      = "static"
	PolicyIdleTimeout = "idle-timeout"
	PolicyBurst       = "burst"
)

// AllPolicies is the default set, in report order.
var AllPolicies = []string{PolicyStatic, PolicyIdleTimeout, PolicyBurst}

// Defaults. Each is a stated assumption; RESULTS.md says where it comes from.
const (
	// DefaultGPUModel stands in for traces that name no GPU (Philly). Philly
	// ran 8-GPU servers of P100 (16 GB) and P40 (24 GB) GPUs; the catalog's
	// nearest 24 GB-class NVIDIA GPU with 1-, 4- and 8-GPU shapes is the
	// A10G (g5). Run times are replayed unchanged, which is conservative:
	// an A10G is at least as fast as a P40/P100 for training.
	DefaultGPUModel = "a10g"
	// DefaultBootMedian is launch-to-Slurm-ready: EC2 pending->running takes
	// 20-40 s (measured by depot.dev and brevdev/ec2-coldboot-research),
	// plus GPU AMI boot, driver load, FSx mount, slurmd registration and
	// Slurm's power-save launch pass (30 s).
	DefaultBootMedian = 2 * time.Minute
	// DefaultBootSigma is the lognormal shape: p95 = median x e^(1.645 sigma),
	// about 3.6 min at 2 min median.
	DefaultBootSigma = 0.35
	// DefaultIdleTimeout is ParallelCluster's scaledown_idletime default
	// (10 minutes) and AWS PCS's ScaleDownIdleTimeInSeconds default (600).
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultWarmWindow is burst.yaml's teardown.warm_reuse default.
	DefaultWarmWindow = 2 * time.Minute
	// DefaultCheckpoint is the checkpoint interval for jobs whose metadata
	// gives none.
	DefaultCheckpoint = 30 * time.Minute
	// DefaultSpotDryProb is the chance that a spot launch finds the pool
	// dry (InsufficientInstanceCapacity) and falls back to the next offering.
	DefaultSpotDryProb = 0.05
	// DefaultMaxSpotInterruptions: after this many interruptions in a row
	// with no checkpoint saved in between, a job is relaunched on on-demand
	// only (a job that makes progress stays on spot).
	DefaultMaxSpotInterruptions = 3
	// DefaultStaticPercentile sizes the static cluster.
	DefaultStaticPercentile = 0.95
	// DefaultSchedDelay is Slurm starting a job on nodes that are up: its
	// event-driven main scheduler runs on submission and on node state
	// changes (burst pokes it when a warm node frees). A stated assumption
	// for both elastic policies and the static cluster.
	DefaultSchedDelay = 2 * time.Second
	// DefaultWarmCapUSDPerDay is the simulated per-class warm-pool cap
	// (burst.yaml classes[].warm.usd_per_day).
	DefaultWarmCapUSDPerDay = 100
	// DefaultWarmInterval is how often the warm pool re-plans every class
	// besides arrivals and job ends (burst-sizer serve's warm.interval).
	DefaultWarmInterval = time.Minute
	// DefaultStaticLookahead bounds how far the static scheduler's backfill
	// looks down the queue.
	DefaultStaticLookahead = 1000
	// minBilledSeconds is EC2's per-second billing minimum for Linux.
	minBilledSeconds = 60
)

// Options configure a simulation. The zero value of every field means its
// default (see the Default* constants); Catalog and Sizer default to the
// embedded catalog and burst's sizing policy.
type Options struct {
	Catalog  *catalog.Catalog
	Sizer    Sizer
	Policies []string // subset of AllPolicies; nil means all
	Seed     uint64   // RNG seed: boot times, dry pools, interruptions

	GPUModel string // GRES type for jobs whose trace names none

	BootMedian time.Duration // median launch-to-ready time
	BootSigma  float64       // lognormal sigma; negative means fixed boot time (= BootMedian)

	IdleTimeout time.Duration // idle-timeout policy's scale-down time
	WarmWindow  time.Duration // burst's warm reuse window; negative means release at once

	// SchedDelay is Slurm's delay from "nodes up" to "job running", paid by
	// every job (a warm hit pays only this); negative means none.
	SchedDelay time.Duration

	// Warm is burst's forecast-driven warm pool (internal/warmpool/forecast).
	Warm WarmOptions

	// Checkpoint is how often jobs checkpoint (run time between saves);
	// negative means never (an interruption loses the whole attempt).
	Checkpoint time.Duration
	// CheckpointOnNotice models burst-agent checkpointing inside the 2-minute
	// spot notice: an interruption then loses no work, only the relaunch.
	CheckpointOnNotice bool

	// Zones are the availability zones burst may launch in (its subnets).
	// Each zone's spot pool is a separate offering in the policy's ranking,
	// and a dry pool draw is made per pool. nil means one pool per type.
	Zones []string

	// AvoidInterruptedPool makes a requeued job's relaunch treat the spot
	// pool that reclaimed it as unavailable (policy.Unavailable), so the
	// policy picks another pool or on-demand. Off by default: burst's EC2
	// provider caches pools that failed with InsufficientInstanceCapacity
	// (modelled by SpotDryProb), not pools that interrupted a node.
	AvoidInterruptedPool bool

	Interruptions        InterruptModel // nil: the Spot Advisor bucket of each type
	SpotDryProb          float64        // negative means 0
	MaxSpotInterruptions int            // in a row without a checkpoint saved; negative means never fall back

	StaticType       string  // instance type of the static cluster; "" = the cheapest 8-GPU type of GPUModel
	StaticPercentile float64 // share of time the static cluster covers demand (0.95)
	StaticLookahead  int     // backfill lookahead in jobs

	// Reserved is a fixed number of reserved nodes (an ODCR or a Capacity
	// Block) that burst uses first; Run then adds a burst+reserved row and
	// Result.Reservation. Nodes 0 means none.
	Reserved Reservation

	// SeriesPoints is the number of samples of cost and GPUs over time kept
	// for the chart (default 600).
	SeriesPoints int
}

func (o Options) withDefaults() Options {
	if o.Catalog == nil {
		o.Catalog = catalog.Default()
	}
	if len(o.Policies) == 0 {
		o.Policies = AllPolicies
	}
	if o.GPUModel == "" {
		o.GPUModel = DefaultGPUModel
	}
	if o.BootMedian == 0 {
		o.BootMedian = DefaultBootMedian
	}
	if o.BootSigma == 0 {
		o.BootSigma = DefaultBootSigma
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.WarmWindow == 0 {
		o.WarmWindow = DefaultWarmWindow
	}
	if o.Checkpoint == 0 {
		o.Checkpoint = DefaultCheckpoint
	}
	if o.Interruptions == nil {
		o.Interruptions = AdvisorRate{}
	}
	if o.SpotDryProb == 0 {
		o.SpotDryProb = DefaultSpotDryProb
	}
	if o.MaxSpotInterruptions == 0 {
		o.MaxSpotInterruptions = DefaultMaxSpotInterruptions
	}
	if o.StaticPercentile == 0 {
		o.StaticPercentile = DefaultStaticPercentile
	}
	if o.StaticLookahead == 0 {
		o.StaticLookahead = DefaultStaticLookahead
	}
	if o.Reserved.Nodes > 0 && o.Reserved.Type == "" {
		// the static cluster's default: the cheapest 8-GPU type of the model
		if t, err := staticType(Options{Catalog: o.Catalog, GPUModel: o.GPUModel}); err == nil {
			o.Reserved.Type = t.Name
		}
	}
	if o.Reserved.Nodes > 0 && o.Reserved.Kind == "" {
		o.Reserved.Kind = ReservationODCR
	}
	if o.SeriesPoints == 0 {
		o.SeriesPoints = 600
	}
	if o.SchedDelay == 0 {
		o.SchedDelay = DefaultSchedDelay
	}
	if o.Warm.CapUSDPerDay == 0 {
		o.Warm.CapUSDPerDay = DefaultWarmCapUSDPerDay
	}
	if o.Warm.Interval == 0 {
		o.Warm.Interval = DefaultWarmInterval
	}
	return o
}

// WarmOptions configure burst's warm pool in the simulation. Zero fields
// take the defaults of internal/warmpool/forecast (and DefaultWarm*).
type WarmOptions struct {
	Disabled      bool          // no warm pool: the reuse window only (burst before issue 19)
	Quantile      float64       // q: share of one boot's node demand kept warm (0.95)
	FixedQuantile bool          // no miss feedback: the target is always the q-quantile
	HalfLife      time.Duration // recent-rate half-life (30 min)
	ProfileWeight float64       // weight of the hour-of-week profile (0.5); negative means 0
	CapUSDPerDay  float64       // per-class hard cap on the pool's spend; negative means 0 (no pool)
	LeadTime      time.Duration // replenishment time assumed by the forecast (default: BootMedian)
	Interval      time.Duration // re-plan period besides events (1 min)
}

func (w WarmOptions) params(o Options) forecast.Params {
	lead := w.LeadTime
	if lead == 0 {
		lead = o.BootMedian
	}
	return forecast.Params{HalfLife: w.HalfLife, ProfileWeight: w.ProfileWeight, Quantile: w.Quantile, FixedQuantile: w.FixedQuantile, LeadTime: lead}.WithDefaults()
}

func (o Options) schedDelay() float64 { return max(o.SchedDelay, 0).Seconds() }

// capUSD is the per-class warm-pool cap (negative means 0).
func (w WarmOptions) capUSD() float64 { return max(w.CapUSDPerDay, 0) }

// validate reports every problem at once.
func (o Options) validate() error {
	var errs []error
	known := map[string]bool{}
	for _, p := range AllPolicies {
		known[p] = true
	}
	for _, p := range o.Policies {
		if !known[p] {
			errs = append(errs, fmt.Errorf("policy %q is unknown; want one of %s", p, strings.Join(AllPolicies, ", ")))
		}
	}
	if o.BootMedian < 0 {
		errs = append(errs, fmt.Errorf("boot median %v is negative", o.BootMedian))
	}
	if o.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("idle timeout %v is negative", o.IdleTimeout))
	}
	if o.SpotDryProb > 1 || math.IsNaN(o.SpotDryProb) {
		errs = append(errs, fmt.Errorf("spot dry probability %g is not in [0,1]", o.SpotDryProb))
	}
	if !(o.StaticPercentile > 0 && o.StaticPercentile <= 1) {
		errs = append(errs, fmt.Errorf("static percentile %g is not in (0,1]", o.StaticPercentile))
	}
	if o.StaticLookahead < 1 {
		errs = append(errs, fmt.Errorf("static lookahead %d is below 1", o.StaticLookahead))
	}
	if !o.Warm.Disabled {
		if err := o.Warm.params(o).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("warm pool: %w", err))
		}
		if o.Warm.Interval < 0 {
			errs = append(errs, fmt.Errorf("warm pool interval %v is negative", o.Warm.Interval))
		}
		if math.IsNaN(o.Warm.CapUSDPerDay) || math.IsInf(o.Warm.CapUSDPerDay, 0) {
			errs = append(errs, fmt.Errorf("warm pool cap %g USD/day is not a number", o.Warm.CapUSDPerDay))
		}
	}
	if o.SeriesPoints < 2 {
		errs = append(errs, fmt.Errorf("series points %d is below 2", o.SeriesPoints))
	}
	errs = append(errs, o.Reserved.validate(o)...)
	if len(o.Catalog.Matching(catalog.Shape{GPUModel: o.GPUModel, GPUs: 1})) == 0 {
		errs = append(errs, fmt.Errorf("gpu model %q has no priced instance type in the catalog; want one of %s", o.GPUModel, strings.Join(o.Catalog.GPUModels(), ", ")))
	}
	return errors.Join(errs...)
}

// bootTime draws one launch-to-ready time in seconds.
func (o Options) bootTime(rng *rand.Rand) float64 {
	m := o.BootMedian.Seconds()
	if o.BootSigma <= 0 {
		return m
	}
	return m * math.Exp(o.BootSigma*rng.NormFloat64())
}

// NodeInfo describes a spot node to an InterruptModel.
type NodeInfo struct {
	Type     catalog.InstanceType
	Launch   time.Duration // since the first submission
	Sequence int           // 0-based count of spot launches so far in this run
}

// InterruptModel decides when EC2 reclaims a spot node.
type InterruptModel interface {
	// NextInterruption returns how long after launch the node is reclaimed,
	// or a negative duration for never. Draw randomness from rng only.
	NextInterruption(rng *rand.Rand, n NodeInfo) time.Duration
	String() string
}

// AdvisorRate draws exponential lifetimes at each type's Spot Instance
// Advisor bucket rate (catalog.InterruptBucket.HourlyRate: the bucket
// midpoint per 730-hour month).
type AdvisorRate struct{}

// NextInterruption implements InterruptModel.
func (AdvisorRate) NextInterruption(rng *rand.Rand, n NodeInfo) time.Duration {
	return expDraw(rng, n.Type.Spot.Bucket.HourlyRate())
}

func (AdvisorRate) String() string { return "advisor" }

// PoissonRate draws exponential lifetimes at a fixed rate per node-hour,
// e.g. a bamboo trace's measured removal rate (trace.RemovalRate).
type PoissonRate struct {
	PerNodeHour float64
	Source      string // where the rate comes from, for reports
}

// NextInterruption implements InterruptModel.
func (p PoissonRate) NextInterruption(rng *rand.Rand, _ NodeInfo) time.Duration {
	return expDraw(rng, p.PerNodeHour)
}

func (p PoissonRate) String() string {
	if p.Source != "" {
		return fmt.Sprintf("%.3g/node-h (%s)", p.PerNodeHour, p.Source)
	}
	return fmt.Sprintf("%.3g/node-h", p.PerNodeHour)
}

func expDraw(rng *rand.Rand, perHour float64) time.Duration {
	if perHour <= 0 {
		return -1
	}
	h := rng.ExpFloat64() / perHour
	if h > 1e6 {
		return -1
	}
	return time.Duration(h * float64(time.Hour))
}

// Request is what the simulation asks the sizer for one job (or one
// relaunch of a job).
type Request struct {
	Job           trace.Job
	GPUModel      string // the job's model, or Options.GPUModel when it names none
	AllowSpot     bool   // false for the idle-timeout baseline and after MaxSpotInterruptions without progress
	Interruptions int    // how often this job was interrupted so far
	// AvoidSpot lists instance types whose spot pool just reclaimed this
	// job's node: the relaunch should not use them (burst-resume marks an
	// interrupted pool unavailable).
	AvoidSpot []string
	Zones     []string // Options.Zones
	// Checkpoint is the interval the simulation applies to this job
	// (Options.Checkpoint); negative means the job does not checkpoint.
	// Metadata's checkpoint= wins.
	Checkpoint time.Duration
}

// Plan is one way to run a job in the simulation: a ranked offering
// (cloud.Offering: type, zone, capacity, price) for Nodes instances of
// Type, on spot or on-demand, at USDPerHour each, in node class Class (the
// plans of one answer share a class; "" means the instance type is the
// class).
type Plan struct {
	Class      string
	Type       catalog.InstanceType
	Zone       string // "" when zones are not modelled
	Spot       bool
	Nodes      int
	USDPerHour float64
}

// Sizer ranks offerings for a job, best first. burst's sizing policy is the
// production implementation (see PolicySizer); tests use fixed ones.
type Sizer interface {
	Offerings(Request) ([]Plan, error)
}
