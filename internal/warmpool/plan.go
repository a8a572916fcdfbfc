package warmpool

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/warmpool/forecast"
)

// nodeKind sorts a class node for the pool.
type nodeKind int

const (
	kindOther   nodeKind = iota // busy, failing, draining, on its way down
	kindWarm                    // up, idle, no job
	kindBooting                 // powering up with no job (launched ahead)
	kindDown                    // powered down, may be powered up
)

func kind(n slurm.Node) nodeKind {
	if n.State != "IDLE" {
		return kindOther // ALLOCATED, MIXED, DOWN, ...: a job or a fault owns it
	}
	for _, f := range []string{"POWER_DOWN", "POWERING_DOWN", "DRAIN", "FAIL", "MAINTENANCE", "REBOOT_REQUESTED", "RESERVED", "COMPLETING"} {
		if n.HasFlag(f) {
			return kindOther
		}
	}
	if n.HasFlag("POWERING_UP") || n.HasFlag("POWER_UP") {
		// also while Slurm still shows POWERED_DOWN, and while a booting
		// cloud node is NOT_RESPONDING
		return kindBooting
	}
	if n.HasFlag("NOT_RESPONDING") {
		return kindOther
	}
	if n.HasFlag("POWERED_DOWN") {
		return kindDown
	}
	return kindWarm
}

// Tick is one pass: observe new jobs, plan every class, act. Errors of one
// class do not stop the others; the first is returned.
func (p *Pool) Tick(ctx context.Context) ([]ClassPlan, error) {
	now := p.now()
	jobs, err := p.o.Slurm.Jobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("warm pool: listing jobs: %w", err)
	}
	nodes, err := p.o.Slurm.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("warm pool: listing nodes: %w", err)
	}
	p.mu.Lock()
	p.observe(jobs, now)
	for _, n := range nodes {
		if !n.SlurmdStart.IsZero() {
			p.slurmdStart[n.Name] = n.SlurmdStart // this pass's: a start's evidence
		}
	}
	p.noteStarts(jobs, now)
	byClass := map[string][]slurm.Node{}
	for _, n := range nodes {
		if cl, ok := p.o.Config.ClassOfNode(n.Name); ok {
			byClass[cl.Name] = append(byClass[cl.Name], n)
			if kind(n) == kindWarm {
				p.lastIdle[n.Name] = now // the next pass's evidence
			}
		}
	}
	p.mu.Unlock()
	if p.o.Fence != nil {
		if err := p.o.Fence(ctx); err != nil {
			return nil, fmt.Errorf("warm pool: not acting: %w", err)
		}
	}

	var plans []ClassPlan
	var firstErr error
	for i := range p.o.Config.Classes {
		cl := &p.o.Config.Classes[i]
		if cl.WarmUSDPerDay <= 0 {
			continue
		}
		cp := p.planClass(ctx, cl, byClass[cl.Name], now)
		if cp.Err != "" && firstErr == nil {
			firstErr = fmt.Errorf("warm pool: class %s: %s", cl.Name, cp.Err)
		}
		plans = append(plans, cp)
	}
	p.mu.Lock()
	p.plans = plans
	p.mu.Unlock()
	if err := p.save(); err != nil {
		p.log().Warn("warm pool: saving the forecasts", "state_file", p.o.StateFile, "err", err)
	}
	return plans, firstErr
}

// planClass is one class's pass: sort its nodes, decide from the forecast
// and the cap, power up and release.
func (p *Pool) planClass(ctx context.Context, cl *config.Class, nodes []slurm.Node, now time.Time) ClassPlan {
	cp := ClassPlan{Class: cl.Name, At: now, CapUSDPerDay: cl.WarmUSDPerDay}
	p.mu.Lock()
	st, down := p.sortClassNodes(&cp, nodes, now)
	f := p.fc[cl.Name]
	p.mu.Unlock()
	price, err := p.o.Price(ctx, cl)
	if err != nil || !(price > 0) {
		// without a price there is no cap: keep nothing warm
		cp.Err = fmt.Sprintf("pricing the class's node: %v", err)
		price = 0
	}
	cp.PriceUSD = price
	p.mu.Lock()
	cp.Plan = forecast.Decide(f, now, forecast.CapNodes(cl.WarmUSDPerDay, price), st)
	p.mu.Unlock()

	p.powerUp(ctx, &cp, down, now)
	p.powerDown(ctx, &cp)
	p.log().Info("warm pool", "class", cl.Name, "rate_per_h", cp.Plan.RatePerHour, "quantile", cp.Plan.Quantile, "miss_rate", cp.Plan.MissRate, "want", cp.Plan.Want, "cap_nodes", cp.Plan.CapNodes,
		"target", cp.Plan.Target, "warm", len(cp.Warm), "booting", len(cp.Booting), "lingering", len(cp.Lingering), "taken", strings.Join(cp.Taken, ","), "adopted", strings.Join(cp.Adopted, ","), "dropped", strings.Join(cp.Dropped, ","), "powered_up", strings.Join(cp.PoweredUp, ","),
		"powered_down", strings.Join(cp.PoweredDown, ","), "price_usd_h", price, "cap_usd_day", cl.WarmUSDPerDay, "err", cp.Err)
	return cp
}

// sortClassNodes sorts a class's nodes into cp (warm, booting, lingering,
// taken, adopted, dropped) and the forecast's state, and returns the
// powered-down nodes the pool may power up. p.mu is held.
func (p *Pool) sortClassNodes(cp *ClassPlan, nodes []slurm.Node, now time.Time) (forecast.State, []string) {
	var st forecast.State
	var down []string
	for _, n := range nodes {
		_, ours := p.owned[n.Name]
		switch kind(n) {
		case kindWarm:
			p.sortWarm(cp, &st, n, ours, now)
		case kindBooting:
			delete(p.idleSince, n.Name)
			if !ours {
				st.Lingering++
				cp.Lingering = append(cp.Lingering, n.Name)
				continue
			}
			st.Booting++
			cp.Booting = append(cp.Booting, n.Name)
		case kindDown:
			delete(p.idleSince, n.Name)
			if at, ok := p.owned[n.Name]; ok && now.Sub(at) < p.o.Config.Slurm.ResumeTimeout.Duration {
				// powered up by the pool, and Slurm has not started the
				// power-up yet: booting
				st.Booting++
				cp.Booting = append(cp.Booting, n.Name)
				continue
			}
			delete(p.owned, n.Name) // powered down (by the pool, Slurm or an admin), or its power-up failed
			down = append(down, n.Name)
		default:
			// a job took it, or it is failing or going down: not the pool's
			delete(p.idleSince, n.Name)
			if ours && (n.State == "ALLOCATED" || n.State == "MIXED") {
				cp.Taken = append(cp.Taken, n.Name)
			}
			if ours {
				delete(p.owned, n.Name)
				if n.State != "ALLOCATED" && n.State != "MIXED" {
					cp.Dropped = append(cp.Dropped, n.Name+"="+n.StateString())
				}
			}
		}
	}
	return st, down
}

// sortWarm sorts an idle node that is up: the pool's (adopted when nobody's
// for longer than a reuse window), or lingering. p.mu is held.
func (p *Pool) sortWarm(cp *ClassPlan, st *forecast.State, n slurm.Node, ours bool, now time.Time) {
	since, ok := p.idleSince[n.Name]
	if !ok {
		since = now
		p.idleSince[n.Name] = now
	}
	if !ours && now.Sub(since) >= p.adoptAfter() {
		// idle and nobody's for longer than a reuse window: the
		// pool adopts it (else it would idle until SuspendTime)
		p.owned[n.Name], ours = since, true
		cp.Adopted = append(cp.Adopted, n.Name)
	}
	if !ours {
		st.Lingering++
		cp.Lingering = append(cp.Lingering, n.Name)
		return
	}
	up := n.BootTime
	if up.IsZero() || up.After(now) {
		up = since
	}
	st.Idle = append(st.Idle, forecast.Idle{Name: n.Name, Since: since, Up: up})
	cp.Warm = append(cp.Warm, n.Name)
}

// powerUp powers up the plan's launches from the powered-down nodes, lowest
// first, and owns them.
func (p *Pool) powerUp(ctx context.Context, cp *ClassPlan, down []string, now time.Time) {
	sortNodes(down)
	n := min(cp.Plan.Launch, len(down))
	if n <= 0 {
		return
	}
	cp.PoweredUp = down[:n]
	if err := p.update(ctx, cp.PoweredUp, "POWER_UP", ""); err != nil {
		cp.Err = join(cp.Err, fmt.Sprintf("powering up %s: %v", strings.Join(cp.PoweredUp, ","), err))
		cp.PoweredUp = nil
	}
	p.mu.Lock()
	for _, n := range cp.PoweredUp {
		p.owned[n] = now
	}
	p.mu.Unlock()
}

// powerDown releases the plan's idle nodes and, above the cap, the newest
// booting ones.
func (p *Pool) powerDown(ctx context.Context, cp *ClassPlan) {
	release := append([]string(nil), cp.Plan.Release...)
	if cp.Plan.Cancel > 0 {
		// above the cap: the newest booting nodes go too
		b := append([]string(nil), cp.Booting...)
		sortNodes(b)
		for k := 0; k < cp.Plan.Cancel && k < len(b); k++ {
			release = append(release, b[len(b)-1-k])
		}
	}
	if len(release) == 0 {
		return
	}
	if err := p.update(ctx, release, "POWER_DOWN_ASAP", ReleaseReason); err != nil {
		cp.Err = join(cp.Err, fmt.Sprintf("powering down %s: %v", strings.Join(release, ","), err))
		return
	}
	cp.PoweredDown = release
	p.mu.Lock()
	for _, n := range release {
		delete(p.idleSince, n)
		delete(p.owned, n)
	}
	p.mu.Unlock()
}

// adoptAfter is how long an idle node may belong to nobody before the pool
// adopts it: burst-suspend's reuse window (teardown.warm_reuse) and two
// passes.
func (p *Pool) adoptAfter() time.Duration {
	return p.o.Config.Teardown.WarmReuse.Duration + 2*p.o.Config.Warm.Interval.Duration
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

func (p *Pool) update(ctx context.Context, names []string, state, reason string) error {
	hl, err := hostlist.Compress(names)
	if err != nil {
		hl = strings.Join(names, ",")
	}
	return p.o.Slurm.UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{hl}, State: state, Reason: reason})
}

// sortNodes orders node names by class and number (a10g-2 before a10g-10).
func sortNodes(ns []string) {
	sort.SliceStable(ns, func(i, j int) bool {
		ci, ni := splitNode(ns[i])
		cj, nj := splitNode(ns[j])
		if ci != cj {
			return ci < cj
		}
		return ni < nj
	})
}

func splitNode(n string) (string, int) {
	i := strings.LastIndexByte(n, '-')
	if i < 0 {
		return n, 0
	}
	k := 0
	for _, c := range n[i+1:] {
		if c < '0' || c > '9' {
			return n, 0
		}
		k = k*10 + int(c-'0')
	}
	return n[:i], k
}
