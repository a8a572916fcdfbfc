package simulate

import (
	"fmt"
)

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
	offs, ok := e.offerings(js, req)
	if !ok {
		return
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
	if e.takeReserved(js, offs, cl) { // reservation -> spot -> on-demand
		if js.firstStart < 0 && !js.counted {
			js.counted = true
			e.tl.warmStarts++
			e.outcome(cl, true)
		}
		e.start(js)
		e.evalPool(cl)
		return
	}
	var off *Plan
	if cl.avail(spotOK) < need {
		if off = e.launchOffering(offs, req.AllowSpot); off == nil {
			// Every offering was a dry spot pool: Slurm's next resume attempt.
			e.c.at(e.c.now+60, event{kind: evSubmit, job: js})
			return
		}
	}
	claimed := e.claimNodes(js, cl, need, spotOK)
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
		e.outcome(cl, launched == 0 && claimed == 0)
	}
	if js.pending == 0 {
		e.start(js)
	}
	e.evalPool(cl)
}

// offerings asks the sizer for the job's offerings, best first; false (with
// e.err set) when it fails, offers nothing, or offers too few GPUs.
func (e *elastic) offerings(js *jobState, req Request) ([]Plan, bool) {
	offs, err := e.o.Sizer.Offerings(req)
	if err != nil {
		e.err = fmt.Errorf("simulating %s: sizing job %s (%d GPUs, %s): %w", e.policy, js.job.ID, js.job.GPUs, js.model, err)
		return nil, false
	}
	if len(offs) == 0 {
		e.err = fmt.Errorf("simulating %s: the sizer offers nothing for job %s (%d GPUs, %s)", e.policy, js.job.ID, js.job.GPUs, js.model)
		return nil, false
	}
	for i := range offs {
		o := &offs[i]
		if o.Nodes < 1 || o.Nodes*o.Type.GPUs < js.job.GPUs {
			e.err = fmt.Errorf("simulating %s: the sizer offered %d x %s (%d GPUs each) for job %s needing %d GPUs", e.policy, o.Nodes, o.Type.Name, o.Type.GPUs, js.job.ID, js.job.GPUs)
			return nil, false
		}
	}
	return offs, true
}

// launchOffering is the first offering a launch gets: spot only where
// allowed, and a spot pool may be dry (Options.SpotDryProb, counted). nil
// when every one was dry.
func (e *elastic) launchOffering(offs []Plan, allowSpot bool) *Plan {
	for i := range offs {
		o := &offs[i]
		if o.Spot && !allowSpot {
			continue
		}
		if o.Spot && e.o.SpotDryProb > 0 && e.rng.Float64() < e.o.SpotDryProb {
			e.tl.dry++
			continue
		}
		return o
	}
	return nil
}

// claimNodes gives the job up to need of its class's nodes: idle ones,
// newest first, then booting-ahead ones, earliest launched first (they are
// up soonest). It returns how many booting-ahead nodes it took.
func (e *elastic) claimNodes(js *jobState, cl *classPool, need int, spotOK bool) int {
	js.nodes = js.nodes[:0]
	js.pending = 0
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
	warm := len(js.nodes)
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
	return len(js.nodes) - warm
}

// outcome tells the class's forecast whether a job's first start found
// every node warm (the miss feedback of internal/warmpool/forecast).
func (e *elastic) outcome(cl *classPool, warm bool) {
	if e.warmOn && cl.fc != nil {
		cl.fc.Outcome(warm)
	}
}

func (e *elastic) launch(off Plan, cl *classPool) *node {
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
