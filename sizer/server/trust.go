package server

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/sizer/store"
)

// What the sizer believes of a node's report (a node credential's batch or
// notice; the admin is trusted): the node and instance are the
// credential's; instance type, zone and capacity are the sizer's own
// records of that instance; times are clamped into [launch, now+skew]
// (an interruption dated in the future is refused); a job's samples and
// summary count only if the job ran on that node on this instance: the
// launch record names it, or Slurm shows it allocated to the node and
// started after the instance launched.

// maxProblems bounds ReportResult.Problems.
const maxProblems = 5

// jobCache remembers jobs verified to have run on an instance.
type jobCache struct {
	mu sync.Mutex
	m  map[string]map[uint32]bool // instance -> jobs
}

func (c *jobCache) has(inst string, job uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[inst][job]
}

func (c *jobCache) add(inst string, job uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]map[uint32]bool{}
	}
	if len(c.m) > 10000 { // bounded: a restart of the cache costs one Slurm query per node
		clear(c.m)
	}
	if c.m[inst] == nil {
		c.m[inst] = map[uint32]bool{}
	}
	c.m[inst][job] = true
}

// jobsOnNode returns which of jobs ran on the principal's node and
// instance. An error means Slurm could not be asked: the caller answers
// 503 so the agent keeps its records and retries.
func (s *Server) jobsOnNode(ctx context.Context, p auth.Principal, ni store.NodeIdentity, jobs []uint32) (map[uint32]bool, error) {
	ok := map[uint32]bool{}
	var ask []uint32
	var launchJob string
	if l, found, err := s.st.Launch(ctx, p.InstanceID); err != nil {
		return nil, err
	} else if found {
		launchJob = l.JobID
	}
	for _, j := range jobs {
		switch {
		case s.jobCache.has(p.InstanceID, j), launchJob != "" && launchJob == strconv.FormatUint(uint64(j), 10):
			ok[j] = true
		default:
			ask = append(ask, j)
		}
	}
	if len(ask) == 0 {
		return ok, nil
	}
	if s.o.Slurm == nil {
		return ok, nil // nothing to ask: unverified jobs are refused
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	js, err := s.o.Slurm.Jobs(cctx, ask...)
	if err != nil {
		return nil, fmt.Errorf("asking Slurm which jobs ran on %s: %w", p.Node, err)
	}
	for _, j := range js {
		if j.Nodes == "" || !slices.Contains(ask, j.ID) {
			continue
		}
		names, err := hostlist.Expand(j.Nodes)
		if err != nil || !slices.Contains(names, p.Node) {
			continue
		}
		// a job of the same node name on an earlier instance is not this one's
		if !ni.Pending.IsZero() && !j.StartTime.IsZero() && j.StartTime.Before(ni.Pending.Add(-s.o.ClockSkew)) {
			continue
		}
		ok[j.ID] = true
		s.jobCache.add(p.InstanceID, j.ID)
	}
	return ok, nil
}

// window is the span a node's report times must fall in.
type window struct{ lo, hi, now time.Time }

func (w window) clamp(t time.Time) time.Time {
	switch {
	case t.IsZero():
		return w.now
	case t.After(w.hi):
		return w.now
	case !w.lo.IsZero() && t.Before(w.lo):
		return w.lo
	}
	return t
}

// trustBatch filters and normalises a node credential's batch in place and
// returns the records kept, how many were refused and why.
func (s *Server) trustBatch(ctx context.Context, p auth.Principal, ni store.NodeIdentity, b *sizerapi.ReportBatch) (refused int, problems []string, err error) {
	now := s.now()
	w := window{hi: now.Add(s.o.ClockSkew), now: now}
	if !ni.Pending.IsZero() {
		w.lo = ni.Pending.Add(-s.o.ClockSkew)
	}
	ids := batchJobIDs(b)
	ran := map[uint32]bool{}
	if len(ids) > 0 {
		if ran, err = s.jobsOnNode(ctx, p, ni, ids); err != nil {
			return 0, nil, err
		}
	}
	refuse := func(i int, format string, args ...any) {
		refused++
		if len(problems) < maxProblems {
			problems = append(problems, fmt.Sprintf("records[%d] (seq %d): ", i, b.Records[i].Seq)+fmt.Sprintf(format, args...))
		}
	}
	kept := b.Records[:0:0]
	for i, r := range b.Records {
		r.Time = w.clamp(r.Time)
		switch r.Kind {
		case sizerapi.KindGPU:
			gpus, ok := ownGPUs(r.GPUs, ran, w)
			if !ok {
				refuse(i, "samples of jobs that did not run on node %s (instance %s)", p.Node, p.InstanceID)
				continue
			}
			r.GPUs = gpus
		case sizerapi.KindJobSummary:
			if !ran[r.Summary.JobID] {
				refuse(i, "summary of job %d, which did not run on node %s (instance %s)", r.Summary.JobID, p.Node, p.InstanceID)
				continue
			}
			sum := *r.Summary
			sum.Start, sum.End = w.clamp(sum.Start), w.clamp(sum.End)
			r.Summary = &sum
		case sizerapi.KindInterruption:
			ev, why := s.trustInterruption(ni, p, *r.Event, ran, w)
			if why != "" {
				refuse(i, "%s", why)
				continue
			}
			r.Event = &ev
		case sizerapi.KindGPUHealth:
			// the instance is the credential's (the batch's); jobs not on
			// the node are dropped
			h := *r.Health
			h.Time = w.clamp(h.Time)
			h.Jobs = slices.DeleteFunc(slices.Clone(h.Jobs), func(j uint32) bool { return !ran[j] })
			r.Health = &h
		}
		kept = append(kept, r)
	}
	b.Records = kept
	return refused, problems, nil
}

// batchJobIDs are the jobs a batch's records name, sorted, each once.
func batchJobIDs(b *sizerapi.ReportBatch) []uint32 {
	var ids []uint32
	for _, r := range b.Records {
		for _, g := range r.GPUs {
			ids = append(ids, g.JobIDs...)
		}
		if r.Health != nil {
			ids = append(ids, r.Health.Jobs...)
		}
		if r.Summary != nil {
			ids = append(ids, r.Summary.JobID)
		}
		if r.Event != nil {
			for _, j := range r.Event.Jobs {
				ids = append(ids, j.JobID)
			}
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return ids
}

// ownGPUs keeps in each GPU sample the jobs that ran on the node and
// clamps its time; not ok when it stripped jobs and kept none.
func ownGPUs(in []sizerapi.GPUReading, ran map[uint32]bool, w window) ([]sizerapi.GPUReading, bool) {
	stripped, kept0 := 0, 0
	gpus := make([]sizerapi.GPUReading, len(in))
	for k, g := range in {
		var own []uint32
		for _, j := range g.JobIDs {
			if ran[j] {
				own = append(own, j)
			} else {
				stripped++
			}
		}
		kept0 += len(own)
		g.JobIDs, g.Time = own, w.clamp(g.Time)
		gpus[k] = g
	}
	return gpus, !(stripped > 0 && kept0 == 0)
}

// trustInterruption checks an interruption record against the credential
// and the node, and gives it the credential's instance; why says why not.
func (s *Server) trustInterruption(ni store.NodeIdentity, p auth.Principal, ev sizerapi.Event, ran map[uint32]bool, w window) (sizerapi.Event, string) {
	if ev.InstanceID != "" && ev.InstanceID != p.InstanceID {
		return ev, fmt.Sprintf("interruption of instance %s from the credential of %s", ev.InstanceID, p.InstanceID)
	}
	if why := s.interruptionProblem(ni, ev.Action, ev.NoticeTime, w); why != "" {
		return ev, why
	}
	if why := eventProblem(ev, ran, p, w); why != "" {
		return ev, why
	}
	ev.InstanceID = p.InstanceID
	if !ev.NoticeTime.IsZero() {
		ev.NoticeTime = w.clamp(ev.NoticeTime)
	}
	return ev, ""
}

// MaxEventText bounds an interruption record's error and each job's note
// and error (they are shown on the job's dashboard page).
const MaxEventText = 1000

var signalRE = regexp.MustCompile(`^[A-Z0-9+]{0,16}$`)

// eventProblem says why a batched interruption record is not believed, or
// "": each job it names must have run on the reporting node on this
// instance (as for samples), its texts are bounded and its deadline must
// be within EC2's two minutes (plus the clock skew) of its notice, none
// for a rebalance recommendation (issue 25).
func eventProblem(ev sizerapi.Event, ran map[uint32]bool, p auth.Principal, w window) string {
	for _, j := range ev.Jobs {
		if !ran[j.JobID] {
			return fmt.Sprintf("interruption names job %d, which did not run on node %s (instance %s)", j.JobID, p.Node, p.InstanceID)
		}
		if !signalRE.MatchString(j.Signal) {
			return fmt.Sprintf("job %d: signal %q is not a signal name", j.JobID, j.Signal)
		}
		if len(j.Note) > MaxEventText || len(j.Error) > MaxEventText || !utf8.ValidString(j.Note) || !utf8.ValidString(j.Error) {
			return fmt.Sprintf("job %d: note or error longer than %d bytes or not UTF-8", j.JobID, MaxEventText)
		}
	}
	if len(ev.Error) > MaxEventText || !utf8.ValidString(ev.Error) {
		return fmt.Sprintf("error longer than %d bytes or not UTF-8", MaxEventText)
	}
	if ev.Deadline.IsZero() {
		return ""
	}
	if ev.Action == "rebalance" {
		return "a rebalance recommendation has no deadline"
	}
	notice := ev.NoticeTime
	if notice.IsZero() {
		notice = w.now
	}
	span := 2*time.Minute + w.hi.Sub(w.now) // EC2's warning and the clock skew, either side (a notice seen late)
	if ev.Deadline.Before(notice.Add(-span)) || ev.Deadline.After(notice.Add(span)) {
		return fmt.Sprintf("deadline %s is not within EC2's two minutes after the notice (%s)", ev.Deadline.UTC().Format(time.RFC3339), notice.UTC().Format(time.RFC3339))
	}
	return ""
}

// interruptionProblem says why a node's notice is not believed, or "".
func (s *Server) interruptionProblem(ni store.NodeIdentity, action string, at time.Time, w window) string {
	if at.After(w.hi) {
		return fmt.Sprintf("notice time %s is in the future (server time %s)", at.UTC().Format(time.RFC3339), w.now.UTC().Format(time.RFC3339))
	}
	if ni.Lifecycle != "spot" {
		return fmt.Sprintf("instance %s is %s, not spot: EC2 sends it no spot notice", ni.InstanceID, ni.Lifecycle)
	}
	switch action {
	case "", "terminate", "stop", "hibernate", "rebalance":
	default:
		return fmt.Sprintf("action %q is not terminate, stop, hibernate or rebalance", action)
	}
	return ""
}
