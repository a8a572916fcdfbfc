package simulate

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/sizer/trace"
)

// The static baseline: a fixed on-demand cluster of identical nodes, up for
// the whole trace (first submission to last completion).
//
// Sizing rule: enough nodes for the StaticPercentile (95th) percentile of
// concurrent GPU demand, where demand is the GPUs of jobs that would be
// running if every job started at its submission, weighted by time; and at
// least enough nodes for the largest job.
//
// Scheduling rule: FIFO with greedy backfill. On every arrival and
// completion the scheduler walks the queue from the head (up to
// StaticLookahead jobs) and starts every job that fits now; there are no
// reservations, so a large job can wait behind later small ones. A job of
// up to one node's GPUs goes best-fit (the node with the fewest free GPUs
// that still fit); a larger job takes ceil(GPUs / node GPUs) empty nodes.

type staticJob struct {
	submit float64
	start  float64
	alloc  []staticAlloc
}

type staticAlloc struct{ node, gpus int }

type staticCluster struct {
	gpn    int
	free   []int   // free GPUs per node
	bucket [][]int // bucket[k]: nodes with k free GPUs
	pos    []int   // index of node in its bucket
	total  int     // free GPUs in all
}

func newStaticCluster(nodes, gpn int) *staticCluster {
	s := &staticCluster{gpn: gpn, free: make([]int, nodes), bucket: make([][]int, gpn+1), pos: make([]int, nodes), total: nodes * gpn}
	for i := range nodes {
		s.free[i] = gpn
		s.pos[i] = len(s.bucket[gpn])
		s.bucket[gpn] = append(s.bucket[gpn], i)
	}
	return s
}

func (s *staticCluster) move(n, to int) {
	from := s.free[n]
	b := s.bucket[from]
	last := b[len(b)-1]
	b[s.pos[n]] = last
	s.pos[last] = s.pos[n]
	s.bucket[from] = b[:len(b)-1]
	s.pos[n] = len(s.bucket[to])
	s.bucket[to] = append(s.bucket[to], n)
	s.total += to - from
	s.free[n] = to
}

// fit allocates g GPUs or returns nil.
func (s *staticCluster) fit(g int) []staticAlloc {
	if g > s.total {
		return nil
	}
	if g <= s.gpn {
		for k := g; k <= s.gpn; k++ {
			if len(s.bucket[k]) > 0 {
				n := s.bucket[k][len(s.bucket[k])-1]
				s.move(n, k-g)
				return []staticAlloc{{n, g}}
			}
		}
		return nil
	}
	need := (g + s.gpn - 1) / s.gpn
	if len(s.bucket[s.gpn]) < need {
		return nil
	}
	out := make([]staticAlloc, 0, need)
	left := g
	for range need {
		n := s.bucket[s.gpn][len(s.bucket[s.gpn])-1]
		take := min(left, s.gpn)
		s.move(n, s.gpn-take)
		out = append(out, staticAlloc{n, take})
		left -= take
	}
	return out
}

func (s *staticCluster) releaseAlloc(a []staticAlloc) {
	for _, x := range a {
		s.move(x.node, s.free[x.node]+x.gpus)
	}
}

// staticType picks the static cluster's node type: Options.StaticType, or
// the cheapest on-demand 8-GPU type of the GPU model.
func staticType(o Options) (catalog.InstanceType, error) {
	if o.StaticType != "" {
		t, ok := o.Catalog.Lookup(o.StaticType)
		if !ok || !t.HasPrice() || t.GPUs < 1 {
			return t, fmt.Errorf("static instance type %q is not a priced GPU type in the catalog", o.StaticType)
		}
		return t, nil
	}
	m := o.Catalog.Matching(catalog.Shape{GPUModel: o.GPUModel, GPUs: 8, ExactGPUs: true})
	if len(m) == 0 {
		m = o.Catalog.Matching(catalog.Shape{GPUModel: o.GPUModel, GPUs: 1})
		if len(m) == 0 {
			return catalog.InstanceType{}, fmt.Errorf("no priced %s instance type for the static cluster; set the static type", o.GPUModel)
		}
		sort.SliceStable(m, func(i, j int) bool { return m[i].GPUs > m[j].GPUs })
	}
	return m[0], nil
}

// demandPercentile is the time-weighted p-quantile of concurrent GPU demand
// if every job ran at its submission.
func demandPercentile(jobs []trace.Job, t0 time.Time, p float64) int {
	type step struct {
		t float64
		d int
	}
	steps := make([]step, 0, 2*len(jobs))
	for _, j := range jobs {
		s := j.Submit.Sub(t0).Seconds()
		steps = append(steps, step{s, j.GPUs}, step{s + j.Duration.Seconds(), -j.GPUs})
	}
	sort.Slice(steps, func(a, b int) bool { return steps[a].t < steps[b].t })
	dur := map[int]float64{}
	cur, total := 0, 0.0
	for i, s := range steps {
		if i > 0 {
			dt := s.t - steps[i-1].t
			dur[cur] += dt
			total += dt
		}
		cur += s.d
	}
	if total <= 0 {
		m := 0
		for _, j := range jobs {
			m = max(m, j.GPUs)
		}
		return m
	}
	levels := make([]int, 0, len(dur))
	for l := range dur {
		levels = append(levels, l)
	}
	sort.Ints(levels)
	acc := 0.0
	for _, l := range levels {
		acc += dur[l]
		if acc >= p*total-1e-9 {
			return l
		}
	}
	return levels[len(levels)-1]
}

func runStatic(o Options, jobs []trace.Job, t0 time.Time, span float64) (*tally, int, catalog.InstanceType, error) {
	typ, err := staticType(o)
	if err != nil {
		return nil, 0, typ, fmt.Errorf("simulating static: %w", err)
	}
	gpn := typ.GPUs
	nodes := staticNodes(o, jobs, t0, gpn)
	q := &staticQueue{cl: newStaticCluster(nodes, gpn), jobs: jobs, sj: make([]staticJob, len(jobs)), lookahead: o.StaticLookahead}
	for i := range jobs {
		q.sj[i] = staticJob{submit: jobs[i].Submit.Sub(t0).Seconds(), start: -1}
	}
	end, used := q.replay()
	if len(q.queue) > 0 {
		return nil, 0, typ, fmt.Errorf("simulating static: %d jobs never started (simulator bug)", len(q.queue))
	}
	tl := newTally(span, o.SeriesPoints, len(jobs))
	end = math.Max(end, span)
	rate := float64(nodes) * typ.OnDemandUSD / 3600
	tl.rate = rate
	tl.gpusBilled = nodes * gpn
	tl.finish(end)
	tl.cost = rate * end
	tl.gpuSecBilled = float64(nodes*gpn) * end
	tl.gpuSecUsed = used
	tl.launches = nodes
	for i := range q.sj {
		tl.waits = append(tl.waits, q.sj[i].start-q.sj[i].submit+o.schedDelay())
	}
	return tl, nodes, typ, nil
}

// staticNodes sizes the static cluster: the demand percentile's nodes, and
// at least the largest job's.
func staticNodes(o Options, jobs []trace.Job, t0 time.Time, gpn int) int {
	demand := demandPercentile(jobs, t0, o.StaticPercentile)
	nodes := (demand + gpn - 1) / gpn
	for _, j := range jobs {
		nodes = max(nodes, (j.GPUs+gpn-1)/gpn)
	}
	return max(nodes, 1)
}

// staticQueue replays the trace on the static cluster. Jobs are referenced
// by index through event.gen (the static loop has no generations), so the
// queue stays a slice of ints.
type staticQueue struct {
	cl        *staticCluster
	c         clock
	jobs      []trace.Job
	sj        []staticJob
	queue     []int
	lookahead int
}

// replay runs every arrival and completion and returns when the last job
// ended and the GPU-seconds used.
func (q *staticQueue) replay() (end, used float64) {
	next := 0
	for {
		at := 0.0
		if next < len(q.sj) {
			at = q.sj[next].submit
		}
		ev, arrival, ok := q.c.nextOr(at, next < len(q.sj))
		if !ok {
			break
		}
		if arrival {
			ev = event{t: at, kind: evSubmit, gen: uint32(next)}
			next++
		}
		i := int(ev.gen)
		switch ev.kind {
		case evSubmit:
			q.queue = append(q.queue, i)
		case evStaticEnd:
			q.cl.releaseAlloc(q.sj[i].alloc)
			used += float64(q.jobs[i].GPUs) * q.jobs[i].Duration.Seconds()
			end = q.c.now
		}
		q.schedule()
	}
	return end, used
}

// schedule starts every job in the first lookahead of the queue that fits
// now (FIFO with greedy backfill).
func (q *staticQueue) schedule() {
	if len(q.queue) == 0 || q.cl.total == 0 {
		return
	}
	limit := min(len(q.queue), q.lookahead)
	kept := q.queue[:0:0]
	for qi := 0; qi < limit; qi++ {
		i := q.queue[qi]
		if q.cl.total == 0 {
			kept = append(kept, q.queue[qi:limit]...)
			break
		}
		a := q.cl.fit(q.jobs[i].GPUs)
		if a == nil {
			kept = append(kept, i)
			continue
		}
		q.sj[i].alloc = a
		q.sj[i].start = q.c.now
		q.c.at(q.c.now+q.jobs[i].Duration.Seconds(), event{kind: evStaticEnd, gen: uint32(i)})
	}
	if len(kept) == limit {
		return // nothing started; queue unchanged
	}
	q.queue = append(kept, q.queue[limit:]...)
}
