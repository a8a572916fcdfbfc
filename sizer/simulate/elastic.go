package simulate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/warmpool/forecast"
	"github.com/burst-hpc/burst/sizer/trace"
)

type nodeState uint8

const (
	nodeBooting nodeState = iota
	nodeBusy              // ready and held by a job (running, or waiting for its other nodes)
	nodeIdle
	nodeGone
)

type node struct {
	off       Plan
	class     *classPool
	gpus      int
	launch    float64
	state     nodeState
	gen       uint32
	job       *jobState
	relaunch  bool    // launched for a job that was interrupted: its boot counts as lost
	pool      bool    // idle and held by the warm pool (no reuse-window timer)
	ahead     bool    // launched ahead by the warm pool: booting, no job yet
	idleSince float64 // when it last became idle
	warmFrom  float64 // start of the pool's current stretch on it (-1: none)
	reserved  bool    // one of Options.Reserved's nodes (never booted, never released)
}

type jobState struct {
	job           *trace.Job
	model         string
	submit        float64
	remaining     float64 // seconds of work left
	firstStart    float64 // -1 until the job first runs
	runStart      float64
	nodes         []*node
	pending       int // nodes still booting
	running       bool
	interruptions int
	noProgress    int      // interruptions in a row that saved no checkpoint
	avoidSpot     []string // spot pools to avoid on the next placement
	gen           uint32
	checkpoint    float64 // seconds between checkpoints; <= 0 never
	observed      bool    // its demand is in the class's forecast
	counted       bool    // its first start is classified (warm, ahead, cold)
}

// tally is what every policy reports.
type tally struct {
	cost, gpuSecBilled, gpuSecUsed, gpuSecLost, gpuSecSpot float64
	launches, spotLaunches, dry, interruptions             int
	waits                                                  []float64
	// the warm pool: node-seconds and cost of pool nodes with no job
	// (idle in the pool or booting ahead), pool launches; first starts on
	// warm nodes only, on nodes launched ahead (still booting), and cold
	poolSec, poolCost                   float64
	poolLaunches                        int
	warmStarts, aheadStarts, coldStarts int
	series                              []Sample
	res                                 *reserved // burst+reserved only
	// series bookkeeping
	step, nextSample, cumCost, rate, last float64
	gpusBilled                            int
}

func newTally(span float64, points, jobs int) *tally {
	step := span / float64(points-1)
	if step <= 0 {
		step = 1
	}
	return &tally{step: step, waits: make([]float64, 0, jobs)}
}

// advance integrates spending up to t, emitting samples on the grid.
func (tl *tally) advance(t float64) {
	for tl.nextSample <= t {
		tl.series = append(tl.series, Sample{
			At:      secDur(tl.nextSample),
			CostUSD: tl.cumCost + tl.rate*(tl.nextSample-tl.last),
			GPUs:    tl.gpusBilled,
		})
		tl.cumCost += tl.rate * (tl.nextSample - tl.last)
		tl.last = tl.nextSample
		tl.nextSample += tl.step
	}
	tl.cumCost += tl.rate * (t - tl.last)
	tl.last = t
}

// finish integrates to t and closes the series with a sample at t.
func (tl *tally) finish(t float64) {
	tl.advance(t)
	if n := len(tl.series); n == 0 || tl.series[n-1].At < secDur(t) {
		tl.series = append(tl.series, Sample{At: secDur(t), CostUSD: tl.cumCost, GPUs: tl.gpusBilled})
	}
}

func secDur(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

type elastic struct {
	o         Options
	policy    string
	rng       *rand.Rand
	c         clock
	tl        *tally
	t0        time.Time
	classes   map[string]*classPool
	order     []*classPool // classes in creation order (deterministic ticks)
	spotSeq   int
	allowSpot bool
	window    time.Duration
	warmOn    bool // burst's forecast-driven warm pool (internal/warmpool/forecast)
	wp        forecast.Params
	drain     bool      // the trace's last job has arrived: the pool only shrinks
	end       float64   // time of the last event that changed anything
	res       *reserved // Options.Reserved (burst+reserved only)
	err       error
}

// classPool is one node class's idle nodes and warm pool. A job of the
// class can run on any node of the class (Slurm sees the class's features,
// not the instance type), as long as the capacity fits: a job that may not
// use spot takes on-demand nodes only.
type classPool struct {
	key    string
	idle   []idleEntry // idle nodes, newest last; entries whose node left idle since are skipped
	nIdle  int         // live idle nodes
	nPool  int         // of those, held by the warm pool (no timer)
	ahead  []*node     // nodes launched ahead for the pool, booting, no job
	nAhead int
	fc     *forecast.Forecast
	offs   []Plan // what the pool launches: the offerings the class's latest job could use, best first
}

func runElastic(ctx context.Context, o Options, name string, jobs []trace.Job, t0 time.Time, span float64) (*tally, error) {
	e := newElastic(o, name, len(jobs), t0, span)
	states := newJobStates(o, jobs, t0)
	if err := e.replay(ctx, states); err != nil {
		return nil, err
	}
	e.tl.finish(e.end)
	if e.res != nil {
		e.res.close(e.tl, e.end)
	}
	for i := range states {
		if states[i].firstStart < 0 {
			return nil, fmt.Errorf("simulating %s: job %s never started (simulator bug)", name, states[i].job.ID)
		}
		e.tl.waits = append(e.tl.waits, states[i].firstStart-states[i].submit)
	}
	return e.tl, nil
}

// newElastic is the policy's simulation: burst (with or without the
// reservation) uses spot, its warm window and its warm pool; idle-timeout
// only its timeout.
func newElastic(o Options, name string, jobs int, t0 time.Time, span float64) *elastic {
	burstLike := name == PolicyBurst || name == PolicyBurstReserved
	salt := name
	if burstLike {
		salt = PolicyBurst // the same draws with and without the reservation
	}
	e := &elastic{
		o:         o,
		policy:    name,
		rng:       rand.New(rand.NewPCG(o.Seed, seedSalt(salt))),
		tl:        newTally(span, o.SeriesPoints, jobs),
		t0:        t0,
		classes:   map[string]*classPool{},
		allowSpot: burstLike,
		window:    o.IdleTimeout,
	}
	if name == PolicyBurstReserved {
		e.res = newReserved(o)
		e.tl.res = e.res
	}
	if burstLike {
		e.window = o.WarmWindow
		e.warmOn = !o.Warm.Disabled
		e.wp = o.Warm.params(o)
	}
	e.c.q = make(eventQueue, 0, 1024)
	return e
}

// newJobStates is each job's state before it is submitted: its GPU model,
// work and checkpoint interval (its metadata's, else Options.Checkpoint).
func newJobStates(o Options, jobs []trace.Job, t0 time.Time) []jobState {
	states := make([]jobState, len(jobs))
	for i := range jobs {
		js := &states[i]
		js.job = &jobs[i]
		js.model = jobs[i].GPUModel
		if js.model == "" {
			js.model = o.GPUModel
		}
		js.submit = jobs[i].Submit.Sub(t0).Seconds()
		js.remaining = jobs[i].Duration.Seconds()
		js.firstStart = -1
		js.checkpoint = o.Checkpoint.Seconds()
		if md, errs := jobmeta.ParseMetadata(jobs[i].Metadata); len(errs) == 0 {
			switch {
			case md.NoCheckpoint:
				js.checkpoint = -1
			case md.Checkpoint > 0:
				js.checkpoint = md.Checkpoint.Seconds()
			}
		}
	}
	return states
}

// replay runs the event loop until nothing is left: arrivals (merged with
// the heap, not pushed), boots, ends, timers, interruptions and warm-pool
// ticks.
func (e *elastic) replay(ctx context.Context, states []jobState) error {
	if e.warmOn && len(states) > 0 {
		e.c.at(states[0].submit, event{kind: evWarmTick})
	}
	next := 0 // next arrival
	for n := 0; ; n++ {
		var at float64
		if next < len(states) {
			at = states[next].submit
		}
		ev, arrival, ok := e.c.nextOr(at, next < len(states))
		if !ok {
			return nil
		}
		if arrival {
			ev = event{t: at, kind: evSubmit, job: &states[next]}
			next++
			e.drain = next == len(states)
		}
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("simulating %s: %w", e.policy, err)
			}
		}
		if stale(ev) {
			continue
		}
		e.tl.advance(ev.t)
		if !e.handle(ev, next < len(states)) {
			continue // nothing changed: the chart's clock stays
		}
		e.end = ev.t
		if e.err != nil {
			return e.err
		}
	}
}

// stale: a job's end after it was interrupted, an idle timer of a reused
// node, an interruption of a released node. Stale events are dropped
// before they move the chart's clock.
func stale(ev event) bool {
	switch ev.kind {
	case evJobEnd:
		return ev.gen != ev.job.gen || !ev.job.running
	case evIdleEnd:
		return ev.node.state != nodeIdle || ev.node.gen != ev.gen || ev.node.pool
	case evInterrupt:
		return ev.node.state == nodeGone
	}
	return false
}

// handle acts on one event; false when a warm-pool tick changed nothing.
// arrivalsLeft: jobs are still to arrive.
func (e *elastic) handle(ev event, arrivalsLeft bool) bool {
	switch ev.kind {
	case evSubmit:
		e.place(ev.job)
	case evNodeReady:
		e.nodeReady(ev.node)
	case evJobEnd:
		e.jobEnd(ev.job)
	case evIdleEnd:
		e.windowEnd(ev.node)
	case evInterrupt:
		e.interrupt(ev.node)
	case evWarmTick:
		if !e.tick() {
			if arrivalsLeft || len(e.c.q) > 0 || e.poolLeft() {
				e.c.at(e.c.now+e.o.Warm.Interval.Seconds(), event{kind: evWarmTick})
			}
			return false
		}
		e.c.at(e.c.now+e.o.Warm.Interval.Seconds(), event{kind: evWarmTick})
	}
	return true
}

func seedSalt(policy string) uint64 {
	var h uint64 = 1469598103934665603
	for i := 0; i < len(policy); i++ {
		h = (h ^ uint64(policy[i])) * 1099511628211
	}
	return h
}

func (e *elastic) at(s float64) time.Time { return e.t0.Add(secDur(s)) }

// classOf is the pool of an offering's node class (the instance type when
// the sizer names no class).
func (e *elastic) classOf(off Plan) *classPool {
	key := off.Class
	if key == "" {
		key = off.Type.Name
	}
	c := e.classes[key]
	if c == nil {
		c = &classPool{key: key}
		if e.warmOn {
			c.fc = forecast.NewForecast(e.wp)
		}
		e.classes[key] = c
		e.order = append(e.order, c)
	}
	return c
}
