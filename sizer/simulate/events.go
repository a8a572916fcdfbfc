package simulate

import "container/heap"

type eventKind uint8

const (
	evSubmit    eventKind = iota // a job arrives (or is requeued)
	evNodeReady                  // a launched node finished booting
	evJobEnd                     // a running job finished its remaining work
	evIdleEnd                    // an idle node's timeout/warm window ran out
	evInterrupt                  // EC2 reclaims a spot node
	evStaticEnd                  // a job on the static cluster finished
	evWarmTick                   // burst's warm pool re-plans every class
)

// event is one entry of the simulation's queue. gen guards against stale
// events: a node or job bumps its generation when the state the event was
// scheduled for goes away, and the loop drops events whose gen differs.
type event struct {
	t    float64 // seconds since the first submission
	seq  uint64  // insertion order, for deterministic ties
	kind eventKind
	gen  uint32
	job  *jobState
	node *node
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// clock is the event queue plus the current time.
type clock struct {
	q   eventQueue
	now float64
	seq uint64
}

func (c *clock) at(t float64, e event) {
	if t < c.now {
		t = c.now
	}
	e.t = t
	c.seq++
	e.seq = c.seq
	heap.Push(&c.q, e)
}

// nextOr pops the earliest event, unless an arrival at time t (pending
// true) comes first or at the same time: then it advances the clock to t
// and reports arrival true. Arrivals stay out of the heap (they are
// already sorted), which keeps the heap as small as the live events.
func (c *clock) nextOr(t float64, pending bool) (e event, arrival, ok bool) {
	if pending && (len(c.q) == 0 || t <= c.q[0].t) {
		if t > c.now {
			c.now = t
		}
		return event{}, true, true
	}
	e, ok = c.next()
	return e, false, ok
}

func (c *clock) next() (event, bool) {
	if len(c.q) == 0 {
		return event{}, false
	}
	e := heap.Pop(&c.q).(event)
	c.now = e.t
	return e, true
}
