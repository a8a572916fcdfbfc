// Package warmpool runs burst's warm pool against Slurm (burst-sizer serve
// runs it every warm.interval). Each pass it
//
//   - reads the jobs Slurm holds: each job not seen before counts, at its
//     submit time, towards the forecast of the class it would run on
//     (internal/classmatch; internal/warmpool/forecast);
//   - reads burst's nodes: per class, the nodes up and idle with no job
//     (warm), the nodes powering up with no job (launched ahead), and the
//     nodes powered down;
//   - plans each class with internal/forecast.Decide within its
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
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/warmpool/forecast"
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
	// time (the class's forecast is told too, for its miss feedback): its class, whether every node it runs on was up and idle at the
	// pass before (a warm start: the wait is Slurm's scheduling), and its
	// wait (start - submit, whole seconds as Slurm records them).
	Started func(class string, warm bool, wait time.Duration)
	// Fence, when set, is asked before a pass powers nodes up or down
	// (sizer/store's Fence: whether this sizer still leads); an error skips
	// the pass.
	Fence func(ctx context.Context) error
}

// ReleaseReason is the reason Slurm shows on a node the pool powered down.
const ReleaseReason = "burst: warm pool above the forecast"

// Pool is the warm pool of every class with a cap.
type Pool struct {
	o      Options
	params forecast.Params

	mu        sync.Mutex
	fc        map[string]*forecast.Forecast
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
	Plan                   forecast.Plan
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
	p := &Pool{o: o, fc: map[string]*forecast.Forecast{}, seen: map[uint32]time.Time{}, idleSince: map[string]time.Time{}, owned: map[string]time.Time{}, lastIdle: map[string]time.Time{}, slurmdStart: map[string]time.Time{}, started: map[uint32]time.Time{},
		params: forecast.Params{HalfLife: w.HalfLife.Duration, ProfileWeight: w.ProfileWeight, Quantile: w.Quantile, FixedQuantile: w.FixedQuantile, LeadTime: w.LeadTime.Duration}.WithDefaults()}
	if w.ProfileWeight == 0 {
		p.params.ProfileWeight = 0 // burst.yaml's 0 means recent rate only (Params' zero means its default)
	}
	if err := p.params.Validate(); err != nil {
		return nil, fmt.Errorf("warm pool: %w", err)
	}
	for _, cl := range o.Config.Classes {
		if cl.WarmUSDPerDay > 0 {
			p.fc[cl.Name] = forecast.NewForecast(p.params)
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
