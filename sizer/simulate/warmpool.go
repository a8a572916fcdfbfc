package simulate

import (
	"strconv"

	"github.com/burst-hpc/burst/internal/warmpool/forecast"
)

// The warm pool of the burst policy: the same code as burst-sizer serve's
// (internal/warmpool/forecast), planned on every arrival, job end, node change and every
// WarmOptions.Interval.

// evalPool plans one class: launch ahead up to the target, release the
// pool's idle nodes above it (internal/forecast.Decide). It reports whether it
// changed anything.
func (e *elastic) evalPool(cl *classPool) bool {
	if !e.warmOn || cl.fc == nil || len(cl.offs) == 0 {
		return false
	}
	capN := forecast.CapNodes(e.o.Warm.capUSD(), cl.offs[0].USDPerHour)
	if e.drain {
		capN = 0 // the trace is over: nothing left to forecast
	}
	var pool []*node
	var st forecast.State
	for _, x := range cl.idle {
		if n := x.n; x.live() && n.pool {
			st.Idle = append(st.Idle, forecast.Idle{Name: strconv.Itoa(len(pool)), Since: e.at(n.idleSince), Up: e.at(n.launch)})
			pool = append(pool, n)
		}
	}
	st.Booting = cl.nAhead
	st.Lingering = cl.nIdle - cl.nPool + e.freeFor(cl)
	pl := forecast.Decide(cl.fc, e.at(e.c.now), capN, st)
	changed := false
	for _, name := range pl.Release {
		i, _ := strconv.Atoi(name)
		e.release(pool[i])
		changed = true
	}
	for k := 0; k < pl.Cancel; k++ {
		// the newest first: the others are up sooner
		for i := len(cl.ahead) - 1; i >= 0; i-- {
			if n := cl.ahead[i]; n.ahead && n.state == nodeBooting {
				e.release(n)
				changed = true
				break
			}
		}
	}
	for k := 0; k < pl.Launch; k++ {
		if e.launchAhead(cl) {
			changed = true
		}
	}
	return changed
}

// launchAhead launches one node for the pool from the class's latest
// ranking (spot first where the class and its latest job allow it; a dry
// spot pool falls through to the next offering).
func (e *elastic) launchAhead(cl *classPool) bool {
	for i := range cl.offs {
		o := cl.offs[i]
		if o.Spot && e.o.SpotDryProb > 0 && e.rng.Float64() < e.o.SpotDryProb {
			e.tl.dry++
			continue
		}
		n := e.launch(o, cl)
		n.ahead, n.warmFrom = true, e.c.now
		cl.ahead = append(cl.ahead, n)
		cl.nAhead++
		e.tl.poolLaunches++
		return true
	}
	return false
}

// tick re-plans every class.
func (e *elastic) tick() bool {
	changed := false
	for _, cl := range e.order {
		if e.evalPool(cl) {
			changed = true
		}
	}
	return changed
}

// poolLeft says whether any class still has pool nodes.
func (e *elastic) poolLeft() bool {
	for _, cl := range e.order {
		if cl.nPool > 0 || cl.nAhead > 0 {
			return true
		}
	}
	return false
}
