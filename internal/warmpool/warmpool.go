// Package warmpool runs burst's warm pool against Slurm (burst-sizer serve
// runs it every warm.interval). Each pass it
//
//   - reads the jobs Slurm holds: each job not seen before counts, at its
//     submit time, towards the forecast of the class it would run on
//     (internal/classmatch; internal/warm);
//   - reads burst's nodes: per class, the nodes up and idle with no job
//     (warm), the nodes powering up with no job (launched ahead), and the
//     nodes powered down;
//   - plans each class with internal/warm.Decide within its
//     warm_usd_per_day, and powers nodes up (`scontrol update nodename=X
//     state=POWER_UP`) or down (`state=POWER_DOWN_ASAP`).
//
// A node powered up this way boots through the ordinary ResumeProgram
// (burst-resume: the class's cheapest offering, spot where the class
// allows), and its launch and termination are recorded like any other, so
// warm nodes count in spend. The cap holds by construction: a class never
// has more warm nodes than floor(cap / (24 h x the hourly price of what the
// pool launches)).
package warmpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/classmatch"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/warm"
)

// Slurm is the part of slurm.Client the pool uses.
type Slurm interface {
	Jobs(ctx context.Context, ids ...uint32) ([]slurm.Job, error)
	Nodes(ctx context.Context, names ...string) ([]slurm.Node, error)
	UpdateNodes(ctx context.Context, updates ...slurm.NodeUpdate) error
}

// Pricer is the hourly price of the node the pool would launch for a class
// (the class's best offering for a one-node job with no metadata), for the
// cap.
type Pricer func(ctx context.Context, cl *config.Class) (float64, error)

// Options build a Pool.
type Options struct {
	Config *config.Config
	Slurm  Slurm
	Price  Pricer
	// StateFile keeps the forecasts across restarts ("" keeps nothing).
	StateFile string
	Log       *slog.Logger
	Now       func() time.Time
	// Started, when set, is told of each job seen running for the first
	// time: its class, whether every node it runs on was up and idle at the
	// pass before (a warm start: the wait is Slurm's scheduling), and its
	// wait (start - submit, whole seconds as Slurm records them).
	Started func(class string, warm bool, wait time.Duration)
}

// ReleaseReason is the reason Slurm shows on a node the pool powered down.
const ReleaseReason = "burst: warm pool above the forecast"

// Pool is the warm pool of every class with a cap.
type Pool struct {
	o      Options
	params warm.Params

	mu        sync.Mutex
	fc        map[string]*warm.Forecast
	seen      map[uint32]time.Time // job id -> when first seen (forgotten after a day out of squeue)
	idleSince map[string]time.Time // node -> first seen warm and idle
	// owned are the nodes the pool powered up and that no job has taken
	// since (node -> power-up time): the pool counts, caps and releases
	// only these. Other idle nodes of a class (a node whose job just ended,
	// before burst-suspend powers it down; one kept for a waiting job)
	// count towards the target but are not the pool's.
	owned map[string]time.Time
	plans []ClassPlan
	// lastIdle is when each class node was last seen up and idle,
	// slurmdStart when its slurmd started; started the jobs already seen
	// started
	lastIdle    map[string]time.Time
	slurmdStart map[string]time.Time
	started     map[uint32]time.Time
}

// ClassPlan is one class's last decision, for metrics and the API.
type ClassPlan struct {
	Class                  string
	Plan                   warm.Plan
	Warm                   []string // the pool's nodes up and idle
	Booting                []string // the pool's nodes powering up
	Lingering              []string // other idle nodes of the class (not the pool's)
	Taken                  []string // the pool's nodes a job took since the last pass
	Adopted                []string // idle nodes nobody owned that the pool took over
	Dropped                []string // the pool's nodes that left it otherwise (node=state: failing, draining, going down)
	PriceUSD               float64  // per node-hour of what the pool launches
	CapUSDPerDay           float64  // the class's warm_usd_per_day
	PoweredUp, PoweredDown []string
	At                     time.Time
	Err                    string
}

// New builds the pool and restores the forecasts from StateFile.
func New(o Options) (*Pool, error) {
	if o.Config == nil || o.Slurm == nil || o.Price == nil {
		return nil, errors.New("warm pool: Config, Slurm and Price are required")
	}
	w := o.Config.Warm
	p := &Pool{o: o, fc: map[string]*warm.Forecast{}, seen: map[uint32]time.Time{}, idleSince: map[string]time.Time{}, owned: map[string]time.Time{}, lastIdle: map[string]time.Time{}, slurmdStart: map[string]time.Time{}, started: map[uint32]time.Time{},
		params: warm.Params{HalfLife: w.HalfLife.Duration, ProfileWeight: w.ProfileWeight, Quantile: w.Quantile, LeadTime: w.LeadTime.Duration}.WithDefaults()}
	if w.ProfileWeight == 0 {
		p.params.ProfileWeight = 0 // burst.yaml's 0 means recent rate only (Params' zero means its default)
	}
	if err := p.params.Validate(); err != nil {
		return nil, fmt.Errorf("warm pool: %w", err)
	}
	for _, cl := range o.Config.Classes {
		if cl.WarmUSDPerDay > 0 {
			p.fc[cl.Name] = warm.NewForecast(p.params)
		}
	}
	if err := p.restore(); err != nil {
		p.log().Warn("warm pool: starting with empty forecasts", "state_file", o.StateFile, "err", err)
	}
	return p, nil
}

func (p *Pool) log() *slog.Logger {
	if p.o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.o.Log
}

func (p *Pool) now() time.Time {
	if p.o.Now == nil {
		return time.Now()
	}
	return p.o.Now()
}

// Plans returns the last pass's plans, one per class with a cap.
func (p *Pool) Plans() []ClassPlan {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ClassPlan(nil), p.plans...)
}

// Observe counts the jobs not seen before towards their class's forecast,
// in submit order.
func (p *Pool) Observe(jobs []slurm.Job) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.observe(jobs, p.now())
}

func (p *Pool) observe(jobs []slurm.Job, now time.Time) int {
	fresh := make([]slurm.Job, 0, len(jobs))
	listed := make(map[uint32]bool, len(jobs))
	for _, j := range jobs {
		listed[j.ID] = true
		if _, ok := p.seen[j.ID]; ok {
			continue
		}
		p.seen[j.ID] = now
		fresh = append(fresh, j)
	}
	// forget jobs Slurm no longer lists a day after they were first seen
	for id, at := range p.seen {
		if !listed[id] && now.Sub(at) > 24*time.Hour {
			delete(p.seen, id)
		}
	}
	sort.SliceStable(fresh, func(a, b int) bool { return fresh[a].SubmitTime.Before(fresh[b].SubmitTime) })
	n := 0
	for _, j := range fresh {
		cl := classmatch.ClassOf(p.o.Config, j)
		if cl == nil {
			continue
		}
		f := p.fc[cl.Name]
		if f == nil {
			continue
		}
		at := j.SubmitTime
		if at.IsZero() || at.After(now) {
			at = now
		}
		f.Observe(at, classmatch.Nodes(j))
		n++
	}
	return n
}

// noteStarts tells Options.Started of the jobs seen started for the first
// time (p.mu held). A start is warm when no node of the job booted for it:
// each node's slurmd started before the job was submitted, or in the same
// second (Slurm's slurmd_start_time and submit_time, whole seconds), or, where Slurm does not say, the node
// was seen up and idle at a pass between one interval before the
// submission and the start.
func (p *Pool) noteStarts(jobs []slurm.Job, now time.Time) {
	if p.o.Started == nil {
		return
	}
	listed := map[uint32]bool{}
	for _, j := range jobs {
		listed[j.ID] = true
		if j.State == "PENDING" || j.StartTime.IsZero() || j.SubmitTime.IsZero() || j.Nodes == "" || j.StartTime.After(now) {
			continue
		}
		if _, ok := p.started[j.ID]; ok {
			continue
		}
		p.started[j.ID] = now
		nodes, err := hostlist.Expand(j.Nodes)
		if err != nil || len(nodes) == 0 {
			continue
		}
		cl, ok := p.o.Config.ClassOfNode(nodes[0])
		if !ok {
			continue
		}
		warmStart := true
		from := j.SubmitTime.Add(-p.o.Config.Warm.Interval.Duration)
		for _, n := range nodes {
			if st, ok := p.slurmdStart[n]; ok {
				// whole seconds both: a slurmd started in the submission's
				// second was up already (a boot for the job takes longer)
				warmStart = warmStart && !st.After(j.SubmitTime)
				continue
			}
			t := p.lastIdle[n]
			warmStart = warmStart && !t.Before(from) && !t.After(j.StartTime.Add(time.Second))
		}
		var evidence []string
		for _, n := range nodes {
			evidence = append(evidence, fmt.Sprintf("%s:slurmd_start=%s,last_idle=%s", n, p.slurmdStart[n].Format(time.TimeOnly), p.lastIdle[n].Format(time.TimeOnly)))
		}
		p.log().Debug("job start", "job", j.ID, "class", cl.Name, "warm", warmStart, "submit", j.SubmitTime, "start", j.StartTime, "nodes", strings.Join(evidence, " "))
		p.o.Started(cl.Name, warmStart, max(0, j.StartTime.Sub(j.SubmitTime)))
	}
	for id, at := range p.started {
		if !listed[id] && now.Sub(at) > 24*time.Hour {
			delete(p.started, id)
		}
	}
}

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

func (p *Pool) planClass(ctx context.Context, cl *config.Class, nodes []slurm.Node, now time.Time) ClassPlan {
	cp := ClassPlan{Class: cl.Name, At: now, CapUSDPerDay: cl.WarmUSDPerDay}
	var down []string
	var st warm.State
	p.mu.Lock()
	for _, n := range nodes {
		_, ours := p.owned[n.Name]
		switch kind(n) {
		case kindWarm:
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
				continue
			}
			up := n.BootTime
			if up.IsZero() || up.After(now) {
				up = since
			}
			st.Idle = append(st.Idle, warm.Idle{Name: n.Name, Since: since, Up: up})
			cp.Warm = append(cp.Warm, n.Name)
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
	cp.Plan = warm.Decide(f, now, warm.CapNodes(cl.WarmUSDPerDay, price), st)
	p.mu.Unlock()

	sortNodes(down)
	if n := min(cp.Plan.Launch, len(down)); n > 0 {
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
	release := append([]string(nil), cp.Plan.Release...)
	if cp.Plan.Cancel > 0 {
		// above the cap: the newest booting nodes go too
		b := append([]string(nil), cp.Booting...)
		sortNodes(b)
		for k := 0; k < cp.Plan.Cancel && k < len(b); k++ {
			release = append(release, b[len(b)-1-k])
		}
	}
	if len(release) > 0 {
		if err := p.update(ctx, release, "POWER_DOWN_ASAP", ReleaseReason); err != nil {
			cp.Err = join(cp.Err, fmt.Sprintf("powering down %s: %v", strings.Join(release, ","), err))
		} else {
			cp.PoweredDown = release
			p.mu.Lock()
			for _, n := range release {
				delete(p.idleSince, n)
				delete(p.owned, n)
			}
			p.mu.Unlock()
		}
	}
	p.log().Info("warm pool", "class", cl.Name, "rate_per_h", cp.Plan.RatePerHour, "want", cp.Plan.Want, "cap_nodes", cp.Plan.CapNodes,
		"target", cp.Plan.Target, "warm", len(cp.Warm), "booting", len(cp.Booting), "lingering", len(cp.Lingering), "taken", strings.Join(cp.Taken, ","), "adopted", strings.Join(cp.Adopted, ","), "dropped", strings.Join(cp.Dropped, ","), "powered_up", strings.Join(cp.PoweredUp, ","),
		"powered_down", strings.Join(cp.PoweredDown, ","), "price_usd_h", price, "cap_usd_day", cl.WarmUSDPerDay, "err", cp.Err)
	return cp
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

// Run calls Tick every interval until ctx ends.
func (p *Pool) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := p.Tick(ctx); err != nil && ctx.Err() == nil {
			p.log().Warn("warm pool pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type stateFile struct {
	Version   int                      `json:"version"`
	Params    warm.Params              `json:"params"`
	Forecasts map[string]warm.Snapshot `json:"forecasts"`
	// Seen are the jobs already counted (id -> first seen), so that a
	// restart does not count them again.
	Seen map[uint32]time.Time `json:"seen"`
	// Owned are the pool's nodes (node -> power-up time).
	Owned map[string]time.Time `json:"owned"`
}

func (p *Pool) save() error {
	if p.o.StateFile == "" {
		return nil
	}
	p.mu.Lock()
	sf := stateFile{Version: 1, Params: p.params, Forecasts: map[string]warm.Snapshot{}, Seen: map[uint32]time.Time{}}
	for name, f := range p.fc {
		sf.Forecasts[name] = f.Snapshot()
	}
	for id, at := range p.seen {
		sf.Seen[id] = at
	}
	sf.Owned = map[string]time.Time{}
	for n, at := range p.owned {
		sf.Owned[n] = at
	}
	p.mu.Unlock()
	b, err := json.Marshal(sf)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p.o.StateFile), ".warm-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p.o.StateFile)
}

func (p *Pool) restore() error {
	if p.o.StateFile == "" {
		return nil
	}
	b, err := os.ReadFile(p.o.StateFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var sf stateFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return fmt.Errorf("reading %s: %w", p.o.StateFile, err)
	}
	if sf.Version != 1 {
		return fmt.Errorf("%s: version %d, want 1", p.o.StateFile, sf.Version)
	}
	for name, s := range sf.Forecasts {
		if f := p.fc[name]; f != nil {
			if err := f.Restore(s); err != nil {
				return fmt.Errorf("%s: class %s: %w", p.o.StateFile, name, err)
			}
		}
	}
	for id, at := range sf.Seen {
		p.seen[id] = at
	}
	for n, at := range sf.Owned {
		if _, ok := p.o.Config.ClassOfNode(n); ok {
			p.owned[n] = at
		}
	}
	return nil
}
