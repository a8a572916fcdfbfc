package sizing

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/jobmeta"
)

// RouteInput is everything Route needs about one job.
type RouteInput struct {
	Request     Request
	History     History       // past runs of the same recurring job; zero when none
	Budget      Budget        // the job's account; zero CapUSD means no cap
	Unavailable []Unavailable // entries with an empty Zone exclude a type everywhere
}

// Decision is the submission-time answer. It is what `burst-sizer route
// --json` prints.
type Decision struct {
	Class         string        `json:"class"`
	Constraint    string        `json:"constraint"`          // Slurm feature to set with --constraint
	Partition     string        `json:"partition,omitempty"` // partition to move the job to; "" keeps it
	GPUModel      string        `json:"gpu_model"`
	GPUsPerNode   int           `json:"gpus_per_node"`
	Gres          string        `json:"gres"` // e.g. "gpu:a100:8"
	Nodes         int           `json:"nodes"`
	InstanceTypes []string      `json:"instance_types"`                // best first
	Capacity      capacity.Type `json:"capacity"`                      // capacity of the best offering
	HourlyUSD     float64       `json:"hourly_usd"`                    // expected, all nodes
	EstHours      float64       `json:"est_hours"`                     // 0 when unknown
	EstCostUSD    float64       `json:"est_cost_usd"`                  // 0 when run time is unknown
	NeedGPUMemGiB float64       `json:"need_gpu_memory_gib,omitempty"` // over every GPU of the job
	// NeedGPUMemPerGPUGiB is the memory each GPU needs (the model's
	// estimate, or measured use when learning sized the job).
	NeedGPUMemPerGPUGiB float64    `json:"need_gpu_memory_gib_per_gpu,omitempty"`
	UsableGPUMemGiB     float64    `json:"usable_gpu_memory_gib_per_gpu,omitempty"`
	Memory              *MemoryGiB `json:"memory_gib_per_gpu,omitempty"` // the model's parts, per GPU
	Sharding            string     `json:"sharding,omitempty"`
	ScalingEfficiency   float64    `json:"scaling_efficiency,omitempty"`
	TokenLatencyMS      float64    `json:"token_latency_ms,omitempty"` // inference decode estimate
	TokensPerSec        float64    `json:"tokens_per_s,omitempty"`
	MeetsDeadline       bool       `json:"meets_deadline"` // every target: deadline, latency, throughput
	Downsized           bool       `json:"downsized"`
	Upsized             bool       `json:"upsized,omitempty"`
	SavedUSD            float64    `json:"saved_usd,omitempty"` // downsizing's saving per job (run time unknown: on the work the replaced plan does in an hour; no model: per hour)
	// Explicit lists what the user fixed (gpus, nodes, partition) and the
	// decision kept; Suggestion is a cheaper plan that fits, not applied.
	Explicit      []string `json:"explicit,omitempty"`
	Suggestion    string   `json:"suggestion,omitempty"`
	Warnings      []string `json:"warnings,omitempty"`
	HistoryKey    string   `json:"history_key,omitempty"`
	Reason        string   `json:"reason"`
	Refused       bool     `json:"refused"`
	RefuseMessage string   `json:"refuse_message,omitempty"`
}

// OverBudgetError is returned (wrapping ErrOverBudget) when the account has
// spent its monthly cap. Its message is meant for the user.
type OverBudgetError struct{ Budget Budget }

// ErrOverBudget is the sentinel for over-budget accounts.
var ErrOverBudget = errors.New("account over budget")

func (e *OverBudgetError) Error() string {
	return fmt.Sprintf("account %s is over its monthly GPU budget: spent $%.2f of $%.2f; ask the account's owner to raise the cap in burst.yaml, or wait for next month", e.Budget.Account, e.Budget.SpentUSD, e.Budget.CapUSD)
}

// RouteMessage is what a route refusal tells the submitting user: the
// account and what to do, never its figures. The route credential is
// world-readable and the account is the caller's claim, so any user could
// otherwise read any account's spend (issue 25); burst-resume's error
// (Error, the admin's log) keeps them.
func (e *OverBudgetError) RouteMessage() string {
	return fmt.Sprintf("account %s is over its monthly GPU budget; ask the account's owner to raise the cap in burst.yaml (the dashboard shows the spend), or wait for next month", e.Budget.Account)
}

// Unwrap makes errors.Is(err, ErrOverBudget) true.
func (e *OverBudgetError) Unwrap() error { return ErrOverBudget }

// Route chooses a plan (class, nodes, GPUs per node) for a job at
// submission. What the user set explicitly is kept; a request predicted to
// run out of GPU memory is refused (a Decision with Refused and the
// numbers); a cheaper plan that fits is suggested, or applied when
// Params.RewriteExplicit. It returns a refused Decision (and no error)
// when the account is over budget, and an error wrapping ErrNoClass when
// nothing fits.
func (p *Policy) Route(in RouteInput) (Decision, error) {
	r := in.Request
	if in.Budget.Over() {
		e := &OverBudgetError{Budget: in.Budget}
		return Decision{Refused: true, RefuseMessage: e.RouteMessage(), Reason: "over budget", Nodes: r.nodes()}, nil
	}
	base := p.needOf(r)
	up, down := p.learnFrom(r, in.History)
	grown := base
	if up != nil {
		grown.learn = up
	}
	if !r.Explicit.Any() {
		return p.routeOpen(r, in, base, grown, up, down)
	}
	return p.routeExplicit(r, in, base, grown, up, down)
}

// routeOpen routes a request that left the shape to burst: the cheapest
// plan that holds the job, grown after an out-of-memory run or shrunk
// to what earlier runs used.
func (p *Policy) routeOpen(r Request, in RouteInput, base, grown need, up, down *learned) (Decision, error) {
	res := p.search(r, grown, in.Unavailable)
	if res.best == nil {
		if up != nil {
			// nothing bigger exists: size from the model and say so
			if res2 := p.search(r, base, in.Unavailable); res2.best != nil {
				d := p.decision(r, base, res2)
				d.Warnings = append(d.Warnings, "the last run ran out of GPU memory and no larger plan exists in the classes this job may use")
				return p.finish(r, in, d), nil
			}
		}
		return Decision{}, fmt.Errorf("%w: %s", ErrNoClass, noFitReason(r, base, res))
	}
	d := p.decision(r, grown, res)
	if up != nil {
		d.Upsized = true
		d.Reason = "learned: " + up.note + "; " + d.Reason
	} else if down != nil {
		ln := base
		ln.learn = down
		lr := r // what the request left open is a minimum no longer
		lr.GPUsPerNode, lr.Nodes = 0, 0
		if !base.hasModel() {
			ln.minGPUs = down.minGPUs
		}
		if lres := p.search(lr, ln, in.Unavailable); lres.best != nil && cheaper(lres.best, res.best) &&
			(lres.best.meets || !res.best.meets) {
			ld := p.decision(lr, ln, lres)
			ld.Downsized = true
			usd, text := saving(res.best, lres.best)
			ld.SavedUSD = round2(usd)
			ld.Reason = fmt.Sprintf("learned: %s; %s instead of %s %s; %s", down.note, planName(lres.best), planName(res.best), text, ld.Reason)
			d = ld
		}
	}
	return p.finish(r, in, d), nil
}

// routeExplicit routes a request that fixed some of its shape.
func (p *Policy) routeExplicit(r Request, in RouteInput, base, grown need, up, down *learned) (Decision, error) {
	// The user fixed some of it: size what they asked for, and look for
	// what metadata alone would choose.
	tol := base
	if r.Explicit.GPUs || r.Explicit.Nodes {
		// the user fixed the shape: refuse only beyond the model's measured error
		tol.tolerateNodes = r.nodes()
	}
	asked := p.search(r, tol, in.Unavailable)
	open := r
	open.Explicit, open.GPUsPerNode, open.Nodes, open.GPUModel = Explicit{}, 0, 0, ""
	if !r.Explicit.Partition {
		open.Partition = r.Partition
	}
	freeNeed := grown
	if up == nil && down != nil {
		freeNeed.learn = down
	}
	free := p.search(open, freeNeed, in.Unavailable)
	if asked.best == nil {
		if len(asked.memShort) > 0 && base.hasModel() {
			return p.memoryRefusal(r, base, asked, free, in), nil
		}
		return Decision{}, fmt.Errorf("%w: %s", ErrNoClass, noFitReason(r, base, asked))
	}
	d := p.decision(r, base, asked)
	d.Explicit = r.Explicit.names()
	if asked.best.tight {
		d.Warnings = append(d.Warnings, tightNote(asked.best, base.model))
	}
	if up != nil {
		if o := in.History.LastOOM; o != nil && asked.best.gpus()*asked.best.memMiB <= o.TotalMiB() {
			d.Warnings = append(d.Warnings, fmt.Sprintf("your last run of this job (job %s) ran out of GPU memory with %.0f GiB; this request has %.0f GiB", o.JobID, float64(o.TotalMiB())/1024, float64(asked.best.gpus()*asked.best.memMiB)/1024))
		}
	}
	if free.best != nil && cheaper(free.best, asked.best) && (free.best.meets || !asked.best.meets) {
		usd, text := saving(asked.best, free.best)
		if p.params.RewriteExplicit {
			fd := p.decision(open, freeNeed, free)
			fd.Reason = fmt.Sprintf("rewrote your explicit %s (sizing.rewrite_explicit): %s instead of %s %s; %s",
				strings.Join(r.Explicit.names(), ", "), planName(free.best), planName(asked.best), text, fd.Reason)
			fd.SavedUSD = round2(usd)
			fd.Downsized = true
			return p.finish(open, in, fd), nil
		}
		d.Suggestion = fmt.Sprintf("a cheaper plan fits: %s (est. %s) %s; %s (kept what you asked for)",
			describePlan(free.best), costText(free.best), text, dropHint(r.Explicit))
		d.Reason += "; " + d.Suggestion
	}
	return p.finish(r, in, d), nil
}

// finish adds the warnings every decision carries.
func (p *Policy) finish(r Request, in RouteInput, d Decision) Decision {
	d.HistoryKey = in.History.Key
	if r.Metadata.Deadline == 0 && d.EstHours > 0 {
		if c, ok := p.Class(d.Class); ok && c.MaxTime > 0 && d.EstHours > c.MaxTime.Hours() {
			d.Warnings = append(d.Warnings, fmt.Sprintf("the estimate (%.1f h) is longer than partition %s's MaxTime (%s): the job will be killed unless it checkpoints and resubmits", d.EstHours, c.Partition, fmtDur(c.MaxTime)))
		}
		if d.EstHours > p.params.LongRun.Hours() {
			d.Warnings = append(d.Warnings, fmt.Sprintf("the estimate is %.0f days: give deadline= to scale out over more nodes", d.EstHours/24))
		}
	}
	if in.Budget.CapUSD > 0 && d.EstCostUSD > 0 && in.Budget.SpentUSD+d.EstCostUSD > in.Budget.CapUSD {
		d.Warnings = append(d.Warnings, fmt.Sprintf("this job's estimate would take account %s past its $%.0f budget ($%.2f spent)", in.Budget.Account, in.Budget.CapUSD, in.Budget.SpentUSD))
	}
	for _, w := range d.Warnings {
		d.Reason += "; warning: " + w
	}
	return d
}

func (n need) hasModel() bool { return n.model != nil }

// needOf computes the job's needs from its request and metadata.
func (p *Policy) needOf(r Request) need {
	md := r.Metadata
	n := need{workload: md.Workload}
	if r.TimeLimit > 0 {
		n.hoursFromTL = r.TimeLimit.Hours()
	}
	if !md.HasModel() {
		return n
	}
	tokens := md.TrainTokens()
	if n.workload == jobmeta.WorkloadUnknown {
		switch {
		case md.Method != jobmeta.MethodUnknown:
			n.workload = jobmeta.WorkloadFinetune
			n.note = "workload not given, method given: assumed finetune"
		case md.Latency > 0 || md.Throughput > 0 || md.Context > 0 || tokens == 0:
			n.workload = jobmeta.WorkloadInference
			n.note = "workload not given, no training data: assumed inference"
		default:
			n.workload = jobmeta.WorkloadFinetune
			n.note = "workload not given, data given: assumed finetune"
		}
	}
	m := ModelOf(md, n.workload)
	n.model = &m
	if m.Training() {
		n.flops = TrainingFLOPs(FLOPsPerParamToken(n.workload, m.Method), md.Params, m.Arch, m.Seq, tokens)
	} else {
		n.tokens = tokens
	}
	return n
}

// dropHint tells the user which options to leave out.
func dropHint(e Explicit) string {
	var o []string
	if e.GPUs {
		o = append(o, "--gres/--gpus")
	}
	if e.Nodes {
		o = append(o, "--nodes")
	}
	if e.Partition {
		o = append(o, "--partition")
	}
	return "leave out " + strings.Join(o, " and ") + " to let burst size it"
}

func planName(pl *plan) string {
	return fmt.Sprintf("%d x %s", pl.nodes, pl.class.Name)
}

func describePlan(pl *plan) string {
	s := fmt.Sprintf("%d node(s) of %s (%d x %s per node", pl.nodes, pl.class.Name, pl.gpn, pl.class.GPUModel)
	if pl.needMiB > 0 {
		s += fmt.Sprintf(", %.1f of %.1f GiB per GPU", pl.needMiB/1024, pl.usableMiB/1024)
	}
	return s + ")"
}

func costText(pl *plan) string {
	if pl.cost > 0 {
		return fmt.Sprintf("%.1f h, $%.2f", pl.expHours, pl.cost)
	}
	return fmt.Sprintf("$%.2f/h", pl.hourly)
}

func askedText(r Request) string {
	var parts []string
	if r.Explicit.Nodes {
		parts = append(parts, fmt.Sprintf("%d node(s)", r.nodes()))
	}
	if r.Explicit.GPUs {
		g := fmt.Sprintf("%d GPU(s) per node", r.GPUsPerNode)
		if r.GPUModel != "" {
			g = fmt.Sprintf("%d %s GPU(s) per node", r.GPUsPerNode, r.GPUModel)
		}
		parts = append(parts, g)
	}
	if r.Explicit.Partition {
		parts = append(parts, "partition "+r.Partition)
	}
	return strings.Join(parts, ", ")
}

// firstNeedGiB is the model's per-GPU need on the GPUs the user asked for.
func firstNeedGiB(p *Policy, r Request, n need) float64 {
	if n.model == nil {
		return 0
	}
	g := max(r.GPUsPerNode, 1) * r.nodes()
	sh := n.model.Sharding
	if n.model.Training() && sh == jobmeta.ShardingAuto {
		sh = jobmeta.ShardingZeRO3
	}
	return n.model.MemoryOn(g, sh).PerGPU() / (1 << 30)
}

func noFitReason(r Request, n need, res searchResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job needs")
	if r.Explicit.Nodes {
		fmt.Fprintf(&b, " %d node(s)", r.nodes())
	} else {
		b.WriteString(" node(s)")
	}
	if r.GPUModel != "" {
		fmt.Fprintf(&b, " of %s GPUs", r.GPUModel)
	}
	if r.GPUsPerNode > 0 {
		fmt.Fprintf(&b, " with %d GPU(s) each", r.GPUsPerNode)
	}
	if n.model != nil {
		fmt.Fprintf(&b, " for a %s-param %s", fmtCount(n.model.Params), n.workload)
	}
	all := append(append([]string(nil), res.memShort...), res.rejected...)
	if len(all) > 0 {
		fmt.Fprintf(&b, "; %s", strings.Join(all, "; "))
	}
	b.WriteString("; ask for fewer GPUs/nodes or another GPU model, or ask the admin for a larger class (max_nodes)")
	return b.String()
}

// decision turns the search's best plan into the Decision and its reason.
func (p *Policy) decision(r Request, n need, res searchResult) Decision {
	md := r.Metadata
	pl := res.best
	c := pl.class
	d := Decision{
		Class:       c.Name,
		Constraint:  c.Constraint(),
		Partition:   c.Partition,
		GPUModel:    c.GPUModel,
		GPUsPerNode: pl.gpn,
		Gres:        fmt.Sprintf("gpu:%s:%d", c.GPUModel, pl.gpn),
		Nodes:       pl.nodes,
		Capacity:    pl.best.Capacity,
		HourlyUSD:   round2(pl.hourly),
		EstHours:    round2(pl.expHours),
		EstCostUSD:  round2(pl.cost),
		Sharding:    string(pl.sharding),
	}
	if r.Explicit.Partition {
		d.Partition = ""
	}
	seen := map[string]bool{}
	for _, o := range pl.offers {
		if !seen[o.InstanceType] {
			seen[o.InstanceType] = true
			d.InstanceTypes = append(d.InstanceTypes, o.InstanceType)
		}
	}
	if pl.needMiB > 0 {
		d.NeedGPUMemPerGPUGiB = round2(pl.needMiB / 1024)
		d.NeedGPUMemGiB = round2(pl.needMiB * float64(pl.gpus()) / 1024)
		d.UsableGPUMemGiB = round2(pl.usableMiB / 1024)
	}
	if pl.mem != nil {
		d.Memory = pl.mem.GiB()
		d.Sharding = pl.mem.Sharding
	}
	if pl.eff > 0 && pl.eff < 1 {
		d.ScalingEfficiency = math.Round(pl.eff*1000) / 1000
	}
	if pl.decode != nil {
		d.TokenLatencyMS = round2(pl.decode.TokenLatencySec * 1000)
		d.TokensPerSec = round2(pl.decode.TokensPerSec)
	}
	tg := targetsOf(md)
	d.MeetsDeadline = tg.meets(pl)
	if pl.netNote != "" {
		d.Warnings = append(d.Warnings, pl.networkBound()+"; fewer nodes with more GPUs each, or instance types with EFA, run it faster")
	}
	d.Reason = decisionReason(r, n, res, tg)
	return d
}

// networkBound says how slowly the plan's ZeRO-3 sharding runs over its
// nodes' network (a plan with a netNote).
func (pl *plan) networkBound() string {
	return fmt.Sprintf("network-bound: ZeRO-3 across %d nodes of %s over %g Gbps runs at %.2g of the GPUs' speed", pl.nodes, pl.class.Name, float64(pl.fabric.Mbps)/1000, pl.eff)
}
