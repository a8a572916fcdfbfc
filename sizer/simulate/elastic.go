package simulate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/burst-hpc/burst/internal/jobmeta"
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
	off      Offering
	gpus     int
	launch   float64
	state    nodeState
	gen      uint32
	job      *jobState
	relaunch bool // launched for a job that was interrupted: its boot counts as lost
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
}

// tally is what every policy reports.
type tally struct {
	cost, gpuSecBilled, gpuSecUsed, gpuSecLost, gpuSecSpot float64
	launches, spotLaunches, dry, interruptions             int
	waits                                                  []float64
	series                                                 []Sample
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
	idle      map[string][]*node // by instance type name; stale entries skipped lazily
	spotSeq   int
	allowSpot bool
	window    time.Duration
	end       float64 // time of the last event that changed anything
	err       error
}

func runElastic(ctx context.Context, o Options, name string, jobs []trace.Job, t0 time.Time, span float64) (*tally, error) {
	e := &elastic{
		o:         o,
		policy:    name,
		rng:       rand.New(rand.NewPCG(o.Seed, seedSalt(name))),
		tl:        newTally(span, o.SeriesPoints, len(jobs)),
		idle:      map[string][]*node{},
		allowSpot: name == PolicyBurst,
		window:    o.IdleTimeout,
	}
	if name == PolicyBurst {
		e.window = o.WarmWindow
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
			if ev.node.state != nodeIdle || ev.node.gen != ev.gen {
				continue
			}
		case evInterrupt:
			if ev.node.state == nodeGone {
				continue
			}
		}
		e.tl.advance(ev.t)
		e.end = ev.t
		switch ev.kind {
		case evSubmit:
			e.place(ev.job)
		case evNodeReady:
			e.nodeReady(ev.node)
		case evJobEnd:
			e.jobEnd(ev.job)
		case evIdleEnd:
			e.release(ev.node)
		case evInterrupt:
			e.interrupt(ev.node)
		}
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

// place chooses an offering for a job through the sizer and gets its nodes:
// warm idle nodes of the chosen type first, new launches for the rest.
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
	js.avoidSpot = nil
	var off *Offering
	for i := range offs {
		o := &offs[i]
		if o.Spot && !req.AllowSpot {
			continue
		}
		if o.Nodes < 1 || o.Nodes*o.Type.GPUs < js.job.GPUs {
			e.err = fmt.Errorf("simulating %s: the sizer offered %d x %s (%d GPUs each) for job %s needing %d GPUs", e.policy, o.Nodes, o.Type.Name, o.Type.GPUs, js.job.ID, js.job.GPUs)
			return
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
	js.nodes = js.nodes[:0]
	js.pending = 0
	stack := e.idle[off.Type.Name]
	for len(js.nodes) < off.Nodes && len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.state != nodeIdle {
			continue // stale entry
		}
		n.state, n.job = nodeBusy, js
		n.gen++
		js.nodes = append(js.nodes, n)
	}
	e.idle[off.Type.Name] = stack
	for len(js.nodes) < off.Nodes {
		n := e.launch(*off)
		n.job = js
		n.relaunch = js.interruptions > 0
		js.nodes = append(js.nodes, n)
		js.pending++
	}
	if js.pending == 0 {
		e.start(js)
	}
}

func (e *elastic) launch(off Offering) *node {
	n := &node{off: off, gpus: off.Type.GPUs, launch: e.c.now, state: nodeBooting}
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

func (e *elastic) start(js *jobState) {
	if js.firstStart < 0 {
		js.firstStart = e.c.now
	}
	js.runStart = e.c.now
	js.running = true
	js.gen++
	e.c.at(e.c.now+js.remaining, event{kind: evJobEnd, job: js, gen: js.gen})
}

func (e *elastic) jobEnd(js *jobState) {
	js.running = false
	js.remaining = 0
	e.tl.gpuSecUsed += float64(js.job.GPUs) * js.job.Duration.Seconds()
	for _, n := range js.nodes {
		n.job = nil
		e.makeIdle(n)
	}
	js.nodes = nil
}

func (e *elastic) makeIdle(n *node) {
	if e.window < 0 {
		e.release(n)
		return
	}
	n.state = nodeIdle
	n.job = nil
	n.gen++
	e.idle[n.off.Type.Name] = append(e.idle[n.off.Type.Name], n)
	e.c.at(e.c.now+e.window.Seconds(), event{kind: evIdleEnd, node: n, gen: n.gen})
}

func (e *elastic) release(n *node) {
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
	e.release(n)
	n.job = nil
	if js == nil {
		return
	}
	if js.running {
		ran := e.c.now - js.runStart
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
