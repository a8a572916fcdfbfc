package warmpool

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/classmatch"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/slurm"
)

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

// noteStarts tells the class's forecast (its miss feedback) and
// Options.Started of the jobs seen started for the first time (p.mu held).
// A start is warm when no node of the job booted for it:
// each node's slurmd started before the job was submitted, or in the same
// second (Slurm's slurmd_start_time and submit_time, whole seconds), or, where Slurm does not say, the node
// was seen up and idle at a pass between one interval before the
// submission and the start.
func (p *Pool) noteStarts(jobs []slurm.Job, now time.Time) {
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
		if f := p.fc[cl.Name]; f != nil {
			f.Outcome(warmStart)
		}
		if p.o.Started != nil {
			p.o.Started(cl.Name, warmStart, max(0, j.StartTime.Sub(j.SubmitTime)))
		}
	}
	for id, at := range p.started {
		if !listed[id] && now.Sub(at) > 24*time.Hour {
			delete(p.started, id)
		}
	}
}
