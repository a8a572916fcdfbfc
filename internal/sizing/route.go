package sizing

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// RouteInput is everything Route needs about one job.
type RouteInput struct {
	Request     Request
	History     History       // past jobs of the same user and job name; zero when none
	Budget      Budget        // the job's account; zero CapUSD means no cap
	Unavailable []Unavailable // entries with an empty Zone exclude a type everywhere
}

// Decision is the submission-time answer. It is what `burst-sizer route
// --json` prints.
type Decision struct {
	Class         string           `json:"class"`
	Constraint    string           `json:"constraint"`          // Slurm feature to set with --constraint
	Partition     string           `json:"partition,omitempty"` // partition to move the job to; "" keeps it
	GPUModel      string           `json:"gpu_model"`
	GPUsPerNode   int              `json:"gpus_per_node"`
	Gres          string           `json:"gres"` // e.g. "gpu:a100:8"
	Nodes         int              `json:"nodes"`
	InstanceTypes []string         `json:"instance_types"` // best first
	Capacity      jobmeta.Capacity `json:"capacity"`       // capacity of the best offering
	HourlyUSD     float64          `json:"hourly_usd"`     // expected, all nodes
	EstHours      float64          `json:"est_hours"`      // 0 when unknown
	EstCostUSD    float64          `json:"est_cost_usd"`   // 0 when run time is unknown
	NeedGPUMemGiB float64          `json:"need_gpu_memory_gib,omitempty"`
	MeetsDeadline bool             `json:"meets_deadline"`
	Downsized     bool             `json:"downsized"`
	SavedUSD      float64          `json:"saved_usd,omitempty"` // downsizing's saving per job (or per hour when run time is unknown)
	Reason        string           `json:"reason"`
	Refused       bool             `json:"refused"`
	RefuseMessage string           `json:"refuse_message,omitempty"`
}

// OverBudgetError is returned (wrapping ErrOverBudget) when the account has
// spent its monthly cap. Its message is meant for the user.
type OverBudgetError struct{ Budget Budget }

// ErrOverBudget is the sentinel for over-budget accounts.
var ErrOverBudget = errors.New("account over budget")

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("account %s is over its monthly GPU budget: spent $%.2f of $%.2f; ask the account's owner to raise the cap in burst.yaml, or wait for next month", e.Budget.Account, e.Budget.SpentUSD, e.Budget.CapUSD)
}

// Unwrap makes errors.Is(err, ErrOverBudget) true.
func (e *OverBudgetError) Unwrap() error { return ErrOverBudget }

// candidate is one class evaluated for a job.
type candidate struct {
	class     Class
	offers    []Offering // per type, best capacity first, sorted by expected price
	best      Offering
	hours     float64 // compute hours, 0 when unknown
	expHours  float64 // hours x risk factor of the best offering
	hourly    float64 // expected USD per hour, all nodes
	cost      float64 // expected USD, 0 when hours unknown
	usableMiB float64
	why       string // why on-demand was forced, if it was
}

// need is what the job needs per node.
type need struct {
	memMiB      float64
	minGPUs     int
	flops       float64
	hoursFromTL float64
	workload    jobmeta.Workload
	note        string
}

// Route chooses a node class for a job at submission. It returns a refused
// Decision (and no error) when the account is over budget, and an error
// wrapping ErrNoClass when nothing fits.
func (p *Policy) Route(in RouteInput) (Decision, error) {
	r := in.Request
	if in.Budget.Over() {
		e := &OverBudgetError{Budget: in.Budget}
		return Decision{Refused: true, RefuseMessage: e.Error(), Reason: "over budget", Nodes: r.nodes()}, nil
	}
	base := p.needOf(r)
	cands, rejected := p.candidates(r, base, in.Unavailable)
	if len(cands) == 0 {
		return Decision{}, fmt.Errorf("%w: %s", ErrNoClass, noFitReason(r, base, rejected))
	}
	best, why := choose(cands, r)
	d := p.decision(r, base, best, len(cands), why)

	// Learning: size from what this user's jobs of this name really used.
	if ln, note, ok := p.learnedNeed(r, base, in.History); ok {
		lc, _ := p.candidates(r, ln, in.Unavailable)
		if len(lc) > 0 {
			lb, lwhy := choose(lc, r)
			if lb.class.Name != best.class.Name && lb.hourly < best.hourly && (r.Metadata.Deadline == 0 || lb.expHours <= r.Metadata.Deadline.Hours() || !d.MeetsDeadline) {
				ld := p.decision(r, ln, lb, len(lc), lwhy)
				ld.Downsized = true
				if best.cost > 0 && lb.cost > 0 {
					ld.SavedUSD = best.cost - lb.cost
				} else {
					ld.SavedUSD = best.hourly - lb.hourly
				}
				ld.SavedUSD = round2(ld.SavedUSD)
				ld.Reason = fmt.Sprintf("learned: %s; %s instead of %s saves $%.2f%s; %s", note, lb.class.Name, best.class.Name, ld.SavedUSD, perJobOrHour(best.cost > 0), ld.Reason)
				return ld, nil
			}
		}
	}
	if in.Budget.CapUSD > 0 && d.EstCostUSD > 0 && in.Budget.SpentUSD+d.EstCostUSD > in.Budget.CapUSD {
		d.Reason += fmt.Sprintf("; warning: this job's estimate would take account %s past its $%.0f budget ($%.2f spent)", in.Budget.Account, in.Budget.CapUSD, in.Budget.SpentUSD)
	}
	return d, nil
}

func perJobOrHour(perJob bool) string {
	if perJob {
		return " per run"
	}
	return " an hour"
}

// needOf computes the job's needs from its request and metadata.
func (p *Policy) needOf(r Request) need {
	md := r.Metadata
	n := need{minGPUs: max(r.GPUsPerNode, 0), workload: md.Workload}
	if r.TimeLimit > 0 {
		n.hoursFromTL = r.TimeLimit.Hours()
	}
	if !md.HasModel() {
		return n
	}
	tokens := md.TrainTokens()
	if n.workload == jobmeta.WorkloadUnknown {
		if tokens > 0 {
			n.workload = jobmeta.WorkloadFinetune
			n.note = "workload not given, data given: assumed finetune"
		} else {
			n.workload = jobmeta.WorkloadInference
			n.note = "workload not given, no data: assumed inference"
		}
	}
	bpp := MemoryBytesPerParam(n.workload, md.Precision)
	n.memMiB = md.Params * bpp / (1 << 20)
	n.minGPUs = 1
	n.flops = FLOPsPerParamToken(n.workload) * md.Params * tokens
	return n
}

// learnedNeed returns a smaller need from History when past jobs used at most
// DownsizeFraction of their GPUs or GPU memory.
func (p *Policy) learnedNeed(r Request, base need, h History) (need, string, bool) {
	pr := p.params
	if h.Jobs < pr.DownsizeMinJobs || h.GPUsAllocated <= 0 {
		return need{}, "", false
	}
	lowGPUs := float64(h.GPUsUsed) <= pr.DownsizeFraction*float64(h.GPUsAllocated)
	lowMem := h.GPUMemoryMiBAllocated > 0 && float64(h.PeakGPUMemoryMiB) <= pr.DownsizeFraction*float64(h.GPUMemoryMiBAllocated)
	if !lowGPUs && !lowMem {
		return need{}, "", false
	}
	ln := base
	used := max(h.GPUsUsed, 1)
	if used < ln.minGPUs || ln.minGPUs == 0 {
		ln.minGPUs = used
	}
	learnedMem := float64(h.PeakGPUMemoryMiB) * pr.LearnedHeadroom
	if !r.Metadata.HasModel() || learnedMem > ln.memMiB {
		ln.memMiB = learnedMem
	}
	name := r.JobName
	if name == "" {
		name = "(unnamed)"
	}
	note := fmt.Sprintf("your last %d jobs named %s used at most %d of %d GPUs and %.0f of %.0f GiB GPU memory (mean utilisation %.0f%%)",
		h.Jobs, name, h.GPUsUsed, h.GPUsAllocated, float64(h.PeakGPUMemoryMiB)/1024, float64(h.GPUMemoryMiBAllocated)/1024, h.MeanUtilPct)
	return ln, note, true
}

func (p *Policy) candidates(r Request, n need, unavail []Unavailable) ([]candidate, []string) {
	var out []candidate
	var rejected []string
	nodes := r.nodes()
	for _, c := range p.classes {
		if r.GPUModel != "" && !strings.EqualFold(r.GPUModel, c.GPUModel) {
			continue
		}
		if c.MaxNodes > 0 && nodes > c.MaxNodes {
			rejected = append(rejected, fmt.Sprintf("%s allows %d nodes", c.Name, c.MaxNodes))
			continue
		}
		if c.GPUsPerNode < n.minGPUs {
			continue
		}
		cd := candidate{class: c}
		minMem := math.MaxInt
		for _, tn := range c.InstanceTypes {
			if t, ok := p.cat.Lookup(tn); ok && t.GPUMemoryMiB < minMem {
				minMem = t.GPUMemoryMiB
			}
		}
		if minMem == math.MaxInt {
			continue
		}
		cd.usableMiB = float64(c.GPUsPerNode*minMem) * p.params.UsableGPUMemoryFraction
		if n.memMiB > cd.usableMiB {
			rejected = append(rejected, fmt.Sprintf("%s holds %.0f GiB", c.Name, cd.usableMiB/1024))
			continue
		}
		if n.flops > 0 {
			cd.hours = ComputeHours(n.flops, c.GPUModel, c.GPUsPerNode*nodes)
		} else {
			cd.hours = n.hoursFromTL
		}
		offers, why := p.offerings(c, r, []string{""}, unavail, cd.hours)
		cd.why = why
		if len(offers) == 0 {
			if why != "" {
				rejected = append(rejected, fmt.Sprintf("%s: %s", c.Name, why))
			} else {
				rejected = append(rejected, fmt.Sprintf("%s: no available offering fits %d CPUs / %d MiB", c.Name, r.CPUsPerNode, r.MemoryMiBPerNode))
			}
			continue
		}
		cd.offers = offers
		cd.best = offers[0]
		cd.hourly = cd.best.ExpectedUSD * float64(nodes)
		cd.expHours = cd.hours * cd.best.ExpectedUSD / cd.best.PriceUSD
		cd.cost = cd.hourly * cd.hours
		out = append(out, cd)
	}
	return out, rejected
}

func noFitReason(r Request, n need, rejected []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job needs %d node(s)", r.nodes())
	if r.GPUModel != "" {
		fmt.Fprintf(&b, " of %s GPUs", r.GPUModel)
	}
	if n.minGPUs > 0 {
		fmt.Fprintf(&b, " with at least %d GPU(s)", n.minGPUs)
	}
	if n.memMiB > 0 {
		fmt.Fprintf(&b, " and %.0f GiB GPU memory", n.memMiB/1024)
	}
	if len(rejected) > 0 {
		fmt.Fprintf(&b, "; %s", strings.Join(rejected, "; "))
	}
	b.WriteString("; ask for fewer GPUs/nodes or another GPU model, or ask the admin for a larger class")
	return b.String()
}

// choose picks the best candidate: with a deadline and a computed run time,
// the cheapest that meets it (or the fastest when none does); otherwise the
// cheapest expected cost, or expected hourly price when run time is unknown.
// Ties go to fewer GPUs, then class name.
func choose(cs []candidate, r Request) (candidate, string) {
	less := func(a, b candidate, byCost bool) bool {
		ka, kb := a.hourly, b.hourly
		if byCost && a.cost > 0 && b.cost > 0 {
			ka, kb = a.cost, b.cost
		}
		if ka != kb {
			return ka < kb
		}
		if a.class.GPUsPerNode != b.class.GPUsPerNode {
			return a.class.GPUsPerNode < b.class.GPUsPerNode
		}
		return a.class.Name < b.class.Name
	}
	timed := cs[0].hours > 0 && r.Metadata.HasModel() && r.Metadata.TrainTokens() > 0
	dl := r.Metadata.Deadline.Hours()
	if dl > 0 && timed {
		var meet []candidate
		for _, c := range cs {
			if c.expHours <= dl {
				meet = append(meet, c)
			}
		}
		if len(meet) == 0 {
			f := cs[0]
			for _, c := range cs[1:] {
				if c.expHours < f.expHours || c.expHours == f.expHours && less(c, f, true) {
					f = c
				}
			}
			return f, fmt.Sprintf("no class meets the %s deadline; fastest of %d", fmtDur(r.Metadata.Deadline), len(cs))
		}
		b := meet[0]
		for _, c := range meet[1:] {
			if less(c, b, true) {
				b = c
			}
		}
		return b, fmt.Sprintf("cheapest of %d classes that meet the %s deadline (%d fit)", len(meet), fmtDur(r.Metadata.Deadline), len(cs))
	}
	b := cs[0]
	for _, c := range cs[1:] {
		if less(c, b, true) {
			b = c
		}
	}
	if cs[0].hours > 0 {
		return b, fmt.Sprintf("cheapest expected cost of %d fitting classes", len(cs))
	}
	return b, fmt.Sprintf("cheapest expected hourly price of %d fitting classes", len(cs))
}

func (p *Policy) decision(r Request, n need, c candidate, nfit int, why string) Decision {
	md := r.Metadata
	d := Decision{
		Class:       c.class.Name,
		Constraint:  c.class.Constraint(),
		Partition:   c.class.Partition,
		GPUModel:    c.class.GPUModel,
		GPUsPerNode: c.class.GPUsPerNode,
		Gres:        fmt.Sprintf("gpu:%s:%d", c.class.GPUModel, c.class.GPUsPerNode),
		Nodes:       r.nodes(),
		Capacity:    c.best.Capacity,
		HourlyUSD:   round2(c.hourly),
		EstHours:    round2(c.expHours),
		EstCostUSD:  round2(c.cost),
	}
	seen := map[string]bool{}
	for _, o := range c.offers {
		if !seen[o.InstanceType] {
			seen[o.InstanceType] = true
			d.InstanceTypes = append(d.InstanceTypes, o.InstanceType)
		}
	}
	if n.memMiB > 0 {
		d.NeedGPUMemGiB = round2(n.memMiB / 1024)
	}
	d.MeetsDeadline = md.Deadline == 0 || (c.expHours > 0 && c.expHours <= md.Deadline.Hours())

	var parts []string
	if md.HasModel() {
		s := fmt.Sprintf("%s-param %s", fmtCount(md.Params), n.workload)
		if md.Precision != "" {
			s += " " + string(md.Precision)
		}
		s += fmt.Sprintf(" needs %.0f GiB GPU memory (%.1f B/param)", n.memMiB/1024, MemoryBytesPerParam(n.workload, md.Precision))
		parts = append(parts, s)
		if n.note != "" {
			parts = append(parts, n.note)
		}
	} else if n.minGPUs > 0 {
		parts = append(parts, fmt.Sprintf("no model size given: sized for %d GPU(s)", n.minGPUs))
	}
	parts = append(parts, fmt.Sprintf("%s (%d x %s, %.0f GiB usable) on %s %s at $%.2f/h", c.class.Name, c.class.GPUsPerNode, c.class.GPUModel, c.usableMiB/1024, c.best.InstanceType, c.best.Capacity, c.hourly))
	if n.flops > 0 {
		pf := PerfOf(c.class.GPUModel)
		parts = append(parts, fmt.Sprintf("%.2g FLOPs at %.0f%% of %.0f TFLOPS x %d GPUs = %.1f h", n.flops, pf.MFU*100, pf.PeakTFLOPS, c.class.GPUsPerNode*r.nodes(), c.hours))
	} else if c.hours > 0 {
		parts = append(parts, fmt.Sprintf("run time taken from --time (%.1f h)", c.hours))
	}
	if c.best.Capacity == jobmeta.CapacitySpot {
		parts = append(parts, c.best.Reason)
	} else if c.why != "" {
		parts = append(parts, "on-demand because "+c.why)
	}
	parts = append(parts, why)
	d.Reason = strings.Join(parts, "; ")
	return d
}
