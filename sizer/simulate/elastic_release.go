package simulate

import (
	"math"

	"github.com/burst-hpc/burst/internal/warmpool/forecast"
)

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
	if n.reserved {
		e.freeReserved(n)
		return
	}
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
	capN := forecast.CapNodes(e.o.Warm.capUSD(), cl.offs[0].USDPerHour)
	if cl.nPool+cl.nAhead >= capN {
		return false
	}
	return others+e.freeFor(cl) < min(cl.fc.Target(e.at(e.c.now)), capN)
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
