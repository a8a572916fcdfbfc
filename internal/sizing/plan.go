package sizing

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/jobmeta"
)

// need is what a job needs, whatever the plan.
type need struct {
	model       *Model // nil without params=
	workload    jobmeta.Workload
	note        string
	flops       float64 // training compute; 0 when unknown or inference
	tokens      float64 // inference: tokens to generate (tokens=); 0 unknown
	hoursFromTL float64
	minGPUs     int      // GPUs per node at least (no model: what history says is busy)
	learn       *learned // what past runs say, applied to the plan
	// tolerateNodes: a plan on this many nodes that needs more than the
	// usable memory but no more than the GPUs' memory plus the model's
	// measured error (MemoryError) is admitted, marked tight: the user
	// asked for it explicitly. One that needs more than that ends the
	// class's search: the user fixed the GPUs, and more nodes are not
	// added to make the job fit (--gres without --nodes keeps one node;
	// more nodes may still be added to meet a deadline). 0: never.
	tolerateNodes int
}

// plan is one way to run a job: nodes x GPUs of a class.
type plan struct {
	class      Class
	nodes, gpn int
	fabric     Fabric
	memMiB     int     // per GPU, smallest of the class's types
	usableMiB  float64 // per GPU
	needMiB    float64 // per GPU; 0 when unknown
	mem        *Memory // model's estimate, when there is a model
	sharding   jobmeta.Sharding
	eff        float64
	hours      float64 // compute hours; 0 unknown
	decode     *Decode
	offers     []cloud.Offering
	best       cloud.Offering
	why        string // why on-demand was forced
	expHours   float64
	hourly     float64
	cost       float64
	meets      bool          // meets every target (true when there is none)
	short      func() string // why the plan cannot hold the job; nil when it can
	learnedMem bool          // memory came from measured use
	tight      bool          // needs more than the usable memory, within the model's error (need.tolerateNodes)
	netNote    string        // why ZeRO-3 across nodes is network-bound (shardedNetEfficiency)
	work       float64       // effective TFLOPS of the whole plan (training with a model), for cost per unit of work
}

func (pl *plan) gpus() int { return pl.nodes * pl.gpn }

// targets are what the job must meet: deadline (training, batch) or decode
// latency/throughput (inference).
type targets struct {
	deadlineH  float64
	latencyS   float64
	throughput float64
}

func (t targets) any() bool { return t.deadlineH > 0 || t.latencyS > 0 || t.throughput > 0 }

func targetsOf(md jobmeta.Metadata) targets {
	return targets{deadlineH: md.Deadline.Hours(), latencyS: md.Latency.Seconds(), throughput: md.Throughput}
}

// meets reports whether a plan meets every target it can be judged on. A
// plan whose time is unknown cannot meet a deadline.
func (t targets) meets(pl *plan) bool {
	if t.deadlineH > 0 && !(pl.expHours > 0 && pl.expHours <= t.deadlineH) {
		return false
	}
	if t.latencyS > 0 && (pl.decode == nil || pl.decode.TokenLatencySec > t.latencyS) {
		return false
	}
	if t.throughput > 0 && (pl.decode == nil || pl.decode.TokensPerSec < t.throughput) {
		return false
	}
	return true
}

// searchResult is the planner's answer for one request.
type searchResult struct {
	best     *plan
	fitting  int      // classes with a plan that fits
	meeting  int      // of those, with a plan that meets the targets
	rejected []string // why classes were left out
	memShort []string // memory shortfalls, with the numbers
	minNodes *plan    // the best class's cheapest fitting plan (to say why more nodes were needed)
}

// classFabric is the weakest fabric among a class's instance types, and
// the smallest GPU memory.
func (p *Policy) classShape(c Class) (Fabric, int) {
	f := Fabric{NVLink: true, EFA: true, Gbps: math.MaxInt32, Mbps: math.MaxInt32}
	minMem := math.MaxInt
	for _, tn := range c.InstanceTypes {
		t, ok := p.cat.Lookup(tn)
		if !ok {
			continue
		}
		net, _ := p.cat.NetworkOf(tn)
		tf := fabricOf(t, net, !c.NoEFA)
		f.NVLink = f.NVLink && tf.NVLink
		f.EFA = f.EFA && tf.EFA
		f.Gbps = min(f.Gbps, tf.Gbps)
		f.Mbps = min(f.Mbps, tf.Mbps)
		minMem = min(minMem, t.GPUMemoryMiB)
	}
	if minMem == math.MaxInt {
		return Fabric{}, 0
	}
	return f, minMem
}

// search finds the cheapest plan for a request: in every class that fits
// its explicit choices, the fewest nodes that hold the job and meet its
// targets (cost per run does not fall with more nodes: the same GPU-hours
// at equal or lower scaling efficiency and higher spot risk).
func (p *Policy) search(r Request, n need, unavail []Unavailable) searchResult {
	var res searchResult
	tg := targetsOf(r.Metadata)
	var cands []candidate
	for _, c := range p.classes {
		if r.GPUModel != "" && !strings.EqualFold(r.GPUModel, c.GPUModel) {
			continue
		}
		if r.Explicit.Partition && !c.inPartition(r.Partition) {
			res.rejected = append(res.rejected, fmt.Sprintf("%s is not in partition %s", c.Name, r.Partition))
			continue
		}
		gpn := c.GPUsPerNode
		if r.Explicit.GPUs && r.GPUsPerNode > 0 {
			gpn = r.GPUsPerNode
			if c.GPUsPerNode < gpn {
				continue
			}
		} else if c.GPUsPerNode < max(r.GPUsPerNode, n.minGPUs) {
			continue
		}
		lo, hi := max(r.Nodes, 1), c.maxNodes()
		if r.Explicit.Nodes {
			hi = lo
		}
		if lo > c.maxNodes() {
			res.rejected = append(res.rejected, fmt.Sprintf("%s allows %d nodes", c.Name, c.maxNodes()))
			continue
		}
		fab, memMiB := p.classShape(c)
		if memMiB == 0 {
			continue
		}
		if n.model == nil {
			hi = lo // nothing to scale for
		}
		sc := p.scanNodes(r, n, unavail, tg, c, fab, memMiB, lo, hi, gpn)
		first, chosen, last, short := sc.first, sc.chosen, sc.last, sc.short
		if first == nil {
			res.memShort = append(res.memShort, fmt.Sprintf("%s: %s", c.Name, short()))
			continue
		}
		if chosen == nil {
			chosen = first
			if tg.any() && p.timed(first, n) {
				chosen = last // none meets: the fastest
			}
		}
		for _, pl := range []*plan{first, chosen} {
			if pl.offers == nil {
				p.price(pl, r, unavail)
			}
		}
		if len(chosen.offers) == 0 {
			if chosen.why != "" {
				res.rejected = append(res.rejected, fmt.Sprintf("%s: %s", c.Name, chosen.why))
			} else {
				res.rejected = append(res.rejected, fmt.Sprintf("%s: no available offering fits %d CPUs / %d MiB", c.Name, r.CPUsPerNode, r.MemoryMiBPerNode))
			}
			continue
		}
		chosen.meets = tg.meets(chosen)
		cands = append(cands, candidate{chosen, first})
	}
	res.fitting = len(cands)
	if len(cands) == 0 {
		return res
	}
	for _, c := range cands {
		if c.chosen.meets {
			res.meeting++
		}
	}
	sortCandidates(cands, tg)
	res.best, res.minNodes = cands[0].chosen, cands[0].first
	return res
}

// candidate is a class's chosen plan and its plan on the fewest nodes.
type candidate struct{ chosen, first *plan }

// nodeScan is what scanNodes found in one class: the plan on the fewest
// nodes that hold the job, the plan chosen, the last tried, and why the
// shapes that fell short did.
type nodeScan struct {
	first, chosen, last *plan
	short               func() string
}

// scanNodes tries class c on lo to hi nodes, fewest first, until a plan
// meets the targets.
func (p *Policy) scanNodes(r Request, n need, unavail []Unavailable, tg targets, c Class, fab Fabric, memMiB, lo, hi, gpn int) nodeScan {
	var s nodeScan
	for nodes := lo; nodes <= hi; nodes++ {
		pl := p.shape(c, fab, memMiB, nodes, gpn, n)
		if pl.short != nil {
			s.short = pl.short
			if nodes == n.tolerateNodes {
				break // beyond the margin on the user's shape: refused, not sharded
			}
			continue
		}
		if s.first == nil {
			s.first = pl
		}
		s.last = pl
		if !tg.any() || !p.timed(pl, n) {
			break
		}
		if tg.deadlineH > 0 && pl.hours > tg.deadlineH && nodes < hi {
			continue // spot rework only adds time: this plan cannot meet it
		}
		p.price(pl, r, unavail)
		if pl.offers == nil {
			break
		}
		if tg.meets(pl) {
			s.chosen = pl
			break
		}
	}
	return s
}

// sortCandidates orders the candidates best first.
func sortCandidates(cands []candidate, tg targets) {
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i].chosen, cands[j].chosen
		if a.tight != b.tight {
			return !a.tight // a plan within the usable memory wins over a tight one
		}
		if tg.any() && a.meets != b.meets {
			return a.meets
		}
		if tg.any() && !a.meets {
			return faster(a, b, tg)
		}
		return cheaper(a, b)
	})
}

// timed reports whether the plan has a time or decode estimate.
func (p *Policy) timed(pl *plan, n need) bool {
	return pl.hours > 0 || pl.decode != nil
}

// cheaper compares expected cost per run, or when a run time is unknown,
// the price of a unit of work (hourly price / effective TFLOPS: a plan at
// a tenth of the efficiency costs ten times as much per step), or the
// hourly price when there is no model.
func cheaper(a, b *plan) bool {
	ka, kb := a.hourly, b.hourly
	switch {
	case a.cost > 0 && b.cost > 0:
		ka, kb = a.cost, b.cost
	case a.work > 0 && b.work > 0:
		ka, kb = a.hourly/a.work, b.hourly/b.work
	}
	if ka != kb {
		return ka < kb
	}
	if a.gpus() != b.gpus() {
		return a.gpus() < b.gpus()
	}
	return a.class.Name < b.class.Name
}

// saving is what plan to saves against plan from, on the measure cheaper
// compared them by: dollars per run when both have a run time; when not,
// the price of from's hour of work at to's price per unit of work (so it
// is positive whenever to is cheaper per unit of work, even when its
// hourly price is higher); else dollars an hour. text says which.
func saving(from, to *plan) (usd float64, text string) {
	switch {
	case from.cost > 0 && to.cost > 0:
		usd = from.cost - to.cost
		return usd, fmt.Sprintf("saves $%.2f per run", usd)
	case from.work > 0 && to.work > 0:
		usd = from.hourly - to.hourly*from.work/to.work
		return usd, fmt.Sprintf("costs %.0f%% less per unit of work ($%.4f against $%.4f an hour per effective TFLOPS, $%.2f less for the work %s does in an hour)",
			100*(1-(to.hourly/to.work)/(from.hourly/from.work)), to.hourly/to.work, from.hourly/from.work, usd, planName(from))
	}
	usd = from.hourly - to.hourly
	return usd, fmt.Sprintf("saves $%.2f an hour", usd)
}

func faster(a, b *plan, tg targets) bool {
	if tg.deadlineH > 0 && a.expHours != b.expHours {
		return a.expHours < b.expHours
	}
	if a.decode != nil && b.decode != nil {
		if tg.latencyS > 0 && a.decode.TokenLatencySec != b.decode.TokenLatencySec {
			return a.decode.TokenLatencySec < b.decode.TokenLatencySec
		}
		if a.decode.TokensPerSec != b.decode.TokensPerSec {
			return a.decode.TokensPerSec > b.decode.TokensPerSec
		}
	}
	return cheaper(a, b)
}

// shape evaluates memory and time of nodes x gpn GPUs of a class; a plan
// that cannot hold the job comes back with short set. With
// sharding=auto a training job is replicated when that fits each GPU, else
// sharded with ZeRO-3; a sharding within the usable memory wins over a
// tight one (replicated 7B on 8 GPUs is tight, ZeRO-3 fits).
func (p *Policy) shape(c Class, fab Fabric, memMiB, nodes, gpn int, n need) *plan {
	shardings := []jobmeta.Sharding{jobmeta.ShardingAuto}
	if m := n.model; m != nil && m.Training() {
		shardings = []jobmeta.Sharding{m.Sharding}
		if m.Sharding == jobmeta.ShardingAuto {
			shardings = []jobmeta.Sharding{jobmeta.ShardingReplicated, jobmeta.ShardingZeRO3}
		}
	}
	var pl, tight *plan
	for _, sh := range shardings {
		pl = p.shapeWith(c, fab, memMiB, nodes, gpn, n, sh)
		if pl.short == nil && !pl.tight {
			return pl
		}
		if pl.short == nil && tight == nil {
			tight = pl
		}
	}
	if tight != nil {
		return tight
	}
	return pl
}

func (p *Policy) shapeWith(c Class, fab Fabric, memMiB, nodes, gpn int, n need, sh jobmeta.Sharding) *plan {
	pl := &plan{class: c, nodes: nodes, gpn: gpn, fabric: fab, memMiB: memMiB, eff: 1, sharding: sh}
	pl.usableMiB = float64(memMiB) * p.params.UsableGPUMemoryFraction
	N := pl.gpus()
	const mib = 1 << 20
	if m := n.model; m != nil {
		mem := m.MemoryOn(N, sh)
		pl.mem = &mem
		pl.needMiB = mem.PerGPU() / mib
	}
	if l := n.learn; l != nil && l.down {
		perGPU := l.perGPUMiB
		if n.model != nil && (!n.model.Training() || sh == jobmeta.ShardingZeRO3) && l.totalMiB > 0 {
			perGPU = l.totalMiB / float64(N)
		}
		if perGPU > 0 {
			pl.needMiB, pl.learnedMem = perGPU, true
		}
	}
	if pl.needMiB > pl.usableMiB && n.model != nil && !pl.learnedMem && nodes == n.tolerateNodes {
		if e, _ := n.model.MemoryError(); pl.needMiB <= float64(memMiB)*(1+e) {
			pl.tight = true
		}
	}
	if pl.needMiB > pl.usableMiB && !pl.tight {
		pl.short = func() string {
			what := fmt.Sprintf("%.1f GiB per GPU", pl.needMiB/1024)
			if pl.mem != nil && !pl.learnedMem {
				what = pl.mem.String()
			}
			s := fmt.Sprintf("%d node(s) x %d GPU(s) need %s; a %s GPU holds %.1f GiB usable", nodes, gpn, what, c.GPUModel, pl.usableMiB/1024)
			if n.model != nil && nodes == n.tolerateNodes && !pl.learnedMem {
				e, src := n.model.MemoryError()
				s += fmt.Sprintf(" (%.1f GiB in all), more than the model's measured error allows (+%.0f%%, %s: at most %.1f GiB)", float64(memMiB)/1024, 100*e, src, float64(memMiB)*(1+e)/1024)
			}
			return s
		}
		return pl
	}
	if l := n.learn; l != nil && l.floorTotalMiB > 0 {
		if total := N * memMiB; total <= l.floorTotalMiB {
			pl.short = func() string {
				return fmt.Sprintf("%d node(s) x %d GPU(s) have %.0f GiB; the last run ran out of GPU memory with %.0f GiB", nodes, gpn, float64(total)/1024, float64(l.floorTotalMiB)/1024)
			}
			return pl
		}
		replicated := n.model == nil || n.model.Training() && sh == jobmeta.ShardingReplicated
		if replicated && memMiB <= l.floorPerGPUMiB {
			pl.short = func() string {
				return fmt.Sprintf("each %s GPU has %.0f GiB; the last run ran out of GPU memory with %.0f GiB per GPU and nothing is sharded", c.GPUModel, float64(memMiB)/1024, float64(l.floorPerGPUMiB)/1024)
			}
			return pl
		}
	}
	if n.model != nil {
		pl.estimateSpeed(n)
	}
	if pl.hours == 0 {
		pl.hours = n.hoursFromTL
	}
	return pl
}

// estimateSpeed sets the plan's scaling efficiency, its work rate, and the
// hours (training) or decode speed (inference) of n's model on it.
func (pl *plan) estimateSpeed(n need) {
	m, c, fab, nodes, gpn, memMiB, sh, N := n.model, pl.class, pl.fabric, pl.nodes, pl.gpn, pl.memMiB, pl.sharding, pl.gpus()
	pl.eff = efficiency(fab, nodes, gpn, m.CommVolume(sh))
	if sh == jobmeta.ShardingZeRO3 {
		if ne, note := shardedNetEfficiency(m, c.GPUModel, fab, nodes); ne < pl.eff {
			pl.eff, pl.netNote = ne, note
		}
	}
	if m.Training() {
		pl.work = float64(N) * PerfOf(c.GPUModel).EffectiveTFLOPSAt(m.Params) * pl.eff
	}
	if m.Training() && n.flops > 0 {
		pl.hours = ComputeHours(n.flops, c.GPUModel, m.Params, N, pl.eff)
	}
	if !m.Training() {
		if d, ok := DecodeOn(*m, c.GPUModel, memMiB, nodes, gpn); ok {
			pl.decode = &d
			if n.tokens > 0 {
				pl.hours = n.tokens / d.TokensPerSec / 3600
			}
		}
	}
}

// price fills a plan's offerings and expected cost.
func (p *Policy) price(pl *plan, r Request, unavail []Unavailable) {
	offers, why := p.offerings(pl.class, r, pl.nodes, []string{""}, unavail, pl.hours)
	pl.why = why
	pl.offers = offers
	if len(offers) == 0 {
		pl.offers = []cloud.Offering{}
		return
	}
	pl.best = offers[0]
	pl.hourly = pl.best.ExpectedUSD * float64(pl.nodes)
	pl.expHours = pl.hours * pl.best.ExpectedUSD / pl.best.PriceUSD
	pl.cost = pl.hourly * pl.hours
}
