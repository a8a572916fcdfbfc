package simulate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/burst-hpc/burst/internal/jobmeta"
	"github.com/burst-hpc/burst/internal/warm"
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
	off       Offering
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
	warmOn    bool // burst's forecast-driven warm pool (internal/warm)
	wp        warm.Params
	drain     bool    // the trace's last job has arrived: the pool only shrinks
	end       float64 // time of the last event that changed anything
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
	fc     *warm.Forecast
	offs   []Offering // what the pool launches: the offerings the class's latest job could use, best first
}

func runElastic(ctx context.Context, o Options, name string, jobs []trace.Job, t0 time.Time, span float64) (*tally, error) {
	e := &elastic{
		o:         o,
		policy:    name,
		rng:       rand.New(rand.NewPCG(o.Seed, seedSalt(name))),
		tl:        newTally(span, o.SeriesPoints, len(jobs)),
		t0:        t0,
		classes:   map[string]*classPool{},
		allowSpot: name == PolicyBurst,
		window:    o.IdleTimeout,
	}
	if name == PolicyBurst {
		e.window = o.WarmWindow
		e.warmOn = !o.Warm.Disabled
		e.wp = o.Warm.params(o)
	}
	e.c.q = make(eventQueue, 0, 1024)
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
	if e.warmOn && len(states) > 0 {
		e.c.at(states[0].submit, event{kind: evWarmTick})
	}
	next := 0 // next arrival; arrivals are merged with the heap, not pushed
	for n := 0; ; n++ {
		var at float64
		if next < len(states) {
			at = states[next].submit
		}
		ev, arrival, ok := e.c.nextOr(at, next < len(states))
		if !ok {
			break
		}
		if arrival {
			ev = event{t: at, kind: evSubmit, job: &states[next]}
			next++
			e.drain = next == len(states)
		}
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("simulating %s: %w", name, err)
			}
		}
		// Stale events (a job's end after it was interrupted, an idle
		// timer of a reused node, an interruption of a released node) are
		// dropped before they move the chart's clock.
		switch ev.kind {
		case evJobEnd:
			if ev.gen != ev.job.gen || !ev.job.running {
				continue
			}
		case evIdleEnd:
			if ev.node.state != nodeIdle || ev.node.gen != ev.gen || ev.node.pool {
				continue
			}
		case evInterrupt:
			if ev.node.state == nodeGone {
				continue
			}
		}
		e.tl.advance(ev.t)
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
				if next < len(states) || len(e.c.q) > 0 || e.poolLeft() {
					e.c.at(e.c.now+e.o.Warm.Interval.Seconds(), event{kind: evWarmTick})
				}
				continue // nothing changed: the chart's clock stays
			}
			e.c.at(e.c.now+e.o.Warm.Interval.Seconds(), event{kind: evWarmTick})
		}
		e.end = ev.t
		if e.err != nil {
			return nil, e.err
		}
	}
	e.tl.finish(e.end)
	for i := range states {
		if states[i].firstStart < 0 {
			return nil, fmt.Errorf("simulating %s: job %s never started (simulator bug)", name, states[i].job.ID)
		}
		e.tl.waits = append(e.tl.waits, states[i].firstStart-states[i].submit)
	}
	return e.tl, nil
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
func (e *elastic) classOf(off Offering) *classPool {
	key := off.Class
	if key == "" {
		key = off.Type.Name
	}
	c := e.classes[key]
	if c == nil {
		c = &classPool{key: key}
		if e.warmOn {
			c.fc = warm.NewForecast(e.wp)
		}
		e.classes[key] = c
		e.order = append(e.order, c)
	}
	return c
}

// idleEntry is a node that became idle at generation gen.
type idleEntry struct {
	n   *node
	gen uint32
}

func (x idleEntry) live() bool { return x.n.state == nodeIdle && x.n.gen == x.gen }

func fits(n *node, spotOK bool) bool { return spotOK || !n.off.Spot }

// avail counts the class's idle and booting-ahead nodes a job can take.
func (c *classPool) avail(spotOK bool) int {
	k := 0
	for _, x := range c.idle {
		if x.live() && fits(x.n, spotOK) {
			k++
		}
	}
	for _, n := range c.ahead {
		if n.ahead && n.state == nodeBooting && fits(n, spotOK) {
			k++
		}
	}
	return k
}

// place chooses an offering for a job through the sizer and gets its nodes:
// idle nodes of its class first (newest first), then nodes the warm pool
// launched ahead that are still booting, then new launches.
func (e *elastic) place(js *jobState) {
	req := Request{
		Job:           *js.job,
		GPUModel:      js.model,
		AllowSpot:     e.allowSpot && (e.o.MaxSpotInterruptions < 0 || js.noProgress < e.o.MaxSpotInterruptions),
		Interruptions: js.interruptions,
		AvoidSpot:     js.avoidSpot,
		Zones:         e.o.Zones,
		Checkpoint:    e.o.Checkpoint,
	}
	offs, err := e.o.Sizer.Offerings(req)
	if err != nil {
		e.err = fmt.Errorf("simulating %s: sizing job %s (%d GPUs, %s): %w", e.policy, js.job.ID, js.job.GPUs, js.model, err)
		return
	}
	if len(offs) == 0 {
		e.err = fmt.Errorf("simulating %s: the sizer offers nothing for job %s (%d GPUs, %s)", e.policy, js.job.ID, js.job.GPUs, js.model)
		return
	}
	for i := range offs {
		o := &offs[i]
		if o.Nodes < 1 || o.Nodes*o.Type.GPUs < js.job.GPUs {
			e.err = fmt.Errorf("simulating %s: the sizer offered %d x %s (%d GPUs each) for job %s needing %d GPUs", e.policy, o.Nodes, o.Type.Name, o.Type.GPUs, js.job.ID, js.job.GPUs)
			return
		}
	}
	js.avoidSpot = nil
	spotOK := false // may the job run on spot nodes (the sizer offers spot)
	for _, o := range offs {
		spotOK = spotOK || o.Spot && req.AllowSpot
	}
	cl := e.classOf(offs[0])
	need := offs[0].Nodes
	if cl.fc != nil && !js.observed {
		cl.fc.Observe(e.at(e.c.now), need)
		js.observed = true
	}
	// the pool launches what the class's latest job could use: its ranking
	// (spot first where the class and the job allow it, else on-demand)
	cl.offs = cl.offs[:0]
	for _, o := range offs {
		if !o.Spot || spotOK {
			cl.offs = append(cl.offs, o)
		}
	}
	var off *Offering
	if cl.avail(spotOK) < need {
		for i := range offs {
			o := &offs[i]
			if o.Spot && !req.AllowSpot {
				continue
			}
			if o.Spot && e.o.SpotDryProb > 0 && e.rng.Float64() < e.o.SpotDryProb {
				e.tl.dry++
				continue
			}
			off = o
			break
		}
		if off == nil {
			// Every offering was a dry spot pool: Slurm's next resume attempt.
			e.c.at(e.c.now+60, event{kind: evSubmit, job: js})
			return
		}
	}
	js.nodes = js.nodes[:0]
	js.pending = 0
	// idle nodes, newest first
	for i := len(cl.idle) - 1; i >= 0 && len(js.nodes) < need; i-- {
		x := cl.idle[i]
		n := x.n
		if !x.live() || !fits(n, spotOK) {
			continue
		}
		e.leaveIdle(n)
		n.state, n.job = nodeBusy, js
		n.gen++
		js.nodes = append(js.nodes, n)
	}
	cl.compactIdle()
	warmNodes := len(js.nodes)
	// booting-ahead nodes, earliest launched first (they are up soonest)
	for _, n := range cl.ahead {
		if len(js.nodes) >= need {
			break
		}
		if !n.ahead || n.state != nodeBooting || !fits(n, spotOK) {
			continue
		}
		e.leaveAhead(n)
		n.job = js
		js.nodes = append(js.nodes, n)
		js.pending++
	}
	cl.compactAhead()
	claimed := len(js.nodes) - warmNodes
	launched := 0
	for len(js.nodes) < need {
		n := e.launch(*off, cl)
		n.job = js
		n.relaunch = js.interruptions > 0
		js.nodes = append(js.nodes, n)
		js.pending++
		launched++
	}
	if js.firstStart < 0 && !js.counted {
		js.counted = true
		switch {
		case launched > 0:
			e.tl.coldStarts++
		case claimed > 0:
			e.tl.aheadStarts++
		default:
			e.tl.warmStarts++
		}
	}
	if js.pending == 0 {
		e.start(js)
	}
	e.evalPool(cl)
}

func (e *elastic) launch(off Offering, cl *classPool) *node {
	n := &node{off: off, class: cl, gpus: off.Type.GPUs, launch: e.c.now, state: nodeBooting, warmFrom: -1}
	e.tl.launches++
	e.tl.rate += off.USDPerHour / 3600
	e.tl.gpusBilled += n.gpus
	e.c.at(e.c.now+e.o.bootTime(e.rng), event{kind: evNodeReady, node: n})
	if off.Spot {
		e.tl.spotLaunches++
		d := e.o.Interruptions.NextInterruption(e.rng, NodeInfo{Type: off.Type, Launch: secDur(e.c.now), Sequence: e.spotSeq})
		e.spotSeq++
		if d >= 0 {
			e.c.at(e.c.now+d.Seconds(), event{kind: evInterrupt, node: n})
		}
	}
	return n
}

func (e *elastic) nodeReady(n *node) {
	if n.state != nodeBooting {
		return // reclaimed while booting
	}
	if n.ahead {
		e.leaveAhead(n)
		n.class.compactAhead()
		e.makeIdle(n)
		return
	}
	js := n.job
	if js == nil {
		e.makeIdle(n) // its job was requeued meanwhile
		return
	}
	n.state = nodeBusy
	if n.relaunch {
		e.tl.gpuSecLost += (e.c.now - n.launch) * float64(n.gpus)
		n.relaunch = false
	}
	js.pending--
	if js.pending == 0 {
		e.start(js)
	}
}

// start runs a job whose nodes are all up, after Slurm's scheduling delay.
func (e *elastic) start(js *jobState) {
	at := e.c.now + e.o.schedDelay()
	if js.firstStart < 0 {
		js.firstStart = at
	}
	js.runStart = at
	js.running = true
	js.gen++
	e.c.at(at+js.remaining, event{kind: evJobEnd, job: js, gen: js.gen})
}

func (e *elastic) jobEnd(js *jobState) {
	js.running = false
	js.remaining = 0
	e.tl.gpuSecUsed += float64(js.job.GPUs) * js.job.Duration.Seconds()
	var cl *classPool
	for _, n := range js.nodes {
		n.job = nil
		e.makeIdle(n)
		cl = n.class
	}
	js.nodes = nil
	if cl != nil {
		e.evalPool(cl)
	}
}

// warmFor accounts the stretch since n.warmFrom as time without a job.
func (e *elastic) warmFor(n *node) {
	if n.warmFrom < 0 {
		return
	}
	dt := e.c.now - n.warmFrom
	if n.pool || n.ahead {
		e.tl.poolSec += dt
		e.tl.poolCost += dt * n.off.USDPerHour / 3600
	}
	n.warmFrom = -1
}

// makeIdle: a node is up with no job. With the warm pool on it joins the
// pool when the class has fewer warm nodes than the forecast's target (and
// the cap allows); otherwise it waits out the reuse window (idle timeout).
func (e *elastic) makeIdle(n *node) {
	cl := n.class
	n.state = nodeIdle
	n.job = nil
	n.gen++
	n.warmFrom, n.idleSince = e.c.now, e.c.now
	cl.idle = append(cl.idle, idleEntry{n, n.gen})
	cl.nIdle++
	if e.keep(cl, cl.nIdle-1+cl.nAhead) {
		n.pool = true
		cl.nPool++
		return
	}
	if e.window < 0 {
		e.release(n)
		return
	}
	e.c.at(e.c.now+e.window.Seconds(), event{kind: evIdleEnd, node: n, gen: n.gen})
}

// windowEnd: an idle node's reuse window (idle timeout) is over.
func (e *elastic) windowEnd(n *node) {
	cl := n.class
	if e.keep(cl, cl.nIdle-1+cl.nAhead) {
		e.warmFor(n)
		n.warmFrom = e.c.now
		n.pool = true
		cl.nPool++
		return
	}
	e.release(n)
	e.evalPool(cl)
}

// keep says whether the pool takes one more node when `others` warm nodes
// of the class are there without it.
func (e *elastic) keep(cl *classPool, others int) bool {
	if !e.warmOn || e.drain || cl.fc == nil || len(cl.offs) == 0 {
		return false
	}
	capN := warm.CapNodes(e.o.Warm.capUSD(), cl.offs[0].USDPerHour)
	if cl.nPool+cl.nAhead >= capN {
		return false
	}
	return others < min(cl.fc.Target(e.at(e.c.now)), capN)
}

func (e *elastic) leaveIdle(n *node) {
	cl := n.class
	e.warmFor(n)
	cl.nIdle--
	if n.pool {
		cl.nPool--
		n.pool = false
	}
}

func (e *elastic) leaveAhead(n *node) {
	e.warmFor(n)
	n.ahead = false
	n.pool = false
	n.class.nAhead--
}

func (c *classPool) compactIdle() {
	if len(c.idle) <= 2*c.nIdle+16 {
		return
	}
	k := 0
	for _, x := range c.idle {
		if x.live() {
			c.idle[k] = x
			k++
		}
	}
	clear(c.idle[k:])
	c.idle = c.idle[:k]
}

func (c *classPool) compactAhead() {
	if len(c.ahead) <= 2*c.nAhead+16 {
		return
	}
	k := 0
	for _, n := range c.ahead {
		if n.ahead && n.state == nodeBooting {
			c.ahead[k] = n
			k++
		}
	}
	clear(c.ahead[k:])
	c.ahead = c.ahead[:k]
}

func (e *elastic) release(n *node) {
	switch {
	case n.state == nodeIdle:
		e.leaveIdle(n)
		n.class.compactIdle()
	case n.ahead:
		e.leaveAhead(n)
		n.class.compactAhead()
	}
	n.state = nodeGone
	n.gen++
	billed := e.c.now - n.launch
	e.tl.rate -= n.off.USDPerHour / 3600
	e.tl.gpusBilled -= n.gpus
	if billed < minBilledSeconds {
		e.tl.cumCost += n.off.USDPerHour * (minBilledSeconds - billed) / 3600
		billed = minBilledSeconds
	}
	e.tl.cost += n.off.USDPerHour * billed / 3600
	e.tl.gpuSecBilled += float64(n.gpus) * billed
	if n.off.Spot {
		e.tl.gpuSecSpot += float64(n.gpus) * billed
	}
}

// interrupt: EC2 reclaims a spot node. Its job (if any) loses the work since
// its last checkpoint, its other nodes go idle, and it is requeued.
func (e *elastic) interrupt(n *node) {
	e.tl.interruptions++
	js := n.job
	cl := n.class
	e.release(n)
	n.job = nil
	if js == nil {
		e.evalPool(cl)
		return
	}
	if js.running {
		ran := max(0, e.c.now-js.runStart)
		saved := 0.0
		switch ck := js.checkpoint; {
		case e.o.CheckpointOnNotice && ck > 0:
			saved = ran
		case ck > 0:
			saved = math.Floor(ran/ck) * ck
		}
		e.tl.gpuSecLost += (ran - saved) * float64(js.job.GPUs)
		if saved > 0 {
			js.noProgress = 0
		} else {
			js.noProgress++
		}
		js.remaining -= saved
		if js.remaining < 0 {
			js.remaining = 0
		}
		js.running = false
	} else {
		js.noProgress++
	}
	js.gen++
	js.interruptions++
	js.observed = false // the relaunch asks the class for nodes again
	if e.o.AvoidInterruptedPool && n.off.Spot {
		js.avoidSpot = []string{n.off.Type.Name}
	}
	for _, m := range js.nodes {
		if m == n || m.state == nodeGone {
			continue
		}
		m.job = nil
		if m.state == nodeBusy {
			e.makeIdle(m)
		} // booting nodes go idle when ready
	}
	js.nodes = nil
	js.pending = 0
	e.place(js)
}
