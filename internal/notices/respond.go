package notices

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// What Handle did with an event (the metric's outcome label).
const (
	OutcomeAgent     = "agent"      // the node's agent announced it and acts
	OutcomeAgentLate = "agent-late" // the agent announced it, but the run was still there at the deadline: requeued
	OutcomeHandled   = "handled"    // the sizer checkpointed and requeued (or drained, for a rebalance)
	OutcomeRequeued  = "requeued"   // the node is unreachable: requeued without a checkpoint
	OutcomeNotOurs   = "not-ours"   // not an instance of this cluster (or not a Slurm node)
	OutcomeDuplicate = "duplicate"  // seen before (at-least-once delivery)
	OutcomeReconcile = "reconcile"  // a state change: the reconciler was asked for a pass
	OutcomeIgnored   = "ignored"    // a state change burst need not act on (pending, running)
	OutcomeRetry     = "retry"      // could not tell yet (EC2 or Slurm unreachable): the message comes back
	OutcomeError     = "error"      // acted, and some step failed (logged)
	OutcomeDropped   = "dropped"    // kind "invalid": not an event burst acts on
)

// MaxEventAge: a spot warning or rebalance recommendation older than this
// (or this far in the future) is ignored; EC2's deadline is 2 minutes after
// the warning.
const MaxEventAge = 5 * time.Minute

// Outcomes are every outcome label value Handle and the reader give
// (OutcomeDropped: a message that is not an event burst reads).
var Outcomes = []string{OutcomeAgent, OutcomeAgentLate, OutcomeHandled, OutcomeRequeued, OutcomeNotOurs, OutcomeDuplicate,
	OutcomeReconcile, OutcomeIgnored, OutcomeRetry, OutcomeError, OutcomeDropped}

// spotActions are the agent announcements that stand for an interruption.
var spotActions = []string{"terminate", "stop", "hibernate"}

// Handle acts on one validated event and says what it did.
func (c *Consumer) Handle(ctx context.Context, ev ec2events.Event) (string, error) {
	log := c.log.With("event", ev.ID, "kind", ev.Kind, "instance_id", ev.InstanceID)
	if ev.Kind == ec2events.StateChange {
		return c.stateChange(ctx, ev, log)
	}
	if ev.Kind == ec2events.Scheduled {
		return c.sched.Handle(ctx, ev)
	}
	// a warning older than its own deadline (a message that waited in the
	// queue while the sizer was down, or a replay) or from the future is
	// not acted on: the instance it speaks of is gone or the clock is off
	if age := c.o.Now().Sub(ev.Time); age > MaxEventAge || age < -MaxEventAge {
		log.Warn("EC2 event too old or from the future; ignored", "event_time", ev.Time, "age", age)
		return OutcomeIgnored, nil
	}
	key := string(ev.Kind) + "/" + ev.InstanceID
	if c.firstSight(key) {
		defer c.forgetOnRetry(key)
	} else {
		log.Debug("duplicate EC2 event")
		return OutcomeDuplicate, nil
	}
	insts, err := c.inst.List(ctx)
	if err != nil {
		c.retry(key)
		return OutcomeRetry, fmt.Errorf("listing the cluster's instances: %w", err)
	}
	node, live, spot := "", false, false
	for _, in := range insts {
		if in.ID == ev.InstanceID {
			node, live, spot = in.Node, in.Live(), in.Capacity == capacity.Spot
		}
	}
	if node == "" {
		log.Warn("EC2 event for an instance that is not one of this cluster's nodes; ignored")
		return OutcomeNotOurs, nil
	}
	if !spot {
		// EC2 sends interruption warnings and rebalance recommendations
		// for spot instances only
		log.Warn("EC2 spot event for an on-demand instance of the cluster; not trusted, ignored", "node", node)
		return OutcomeNotOurs, nil
	}
	if !live {
		// its node may already run on a new instance; the reconciler
		// handles an instance that left
		log.Info("EC2 event for an instance that already left running; ignored", "node", node)
		return OutcomeIgnored, nil
	}
	return c.actOnSpot(ctx, ev, key, node, log)
}

// stateChange records an instance's state for the ledger and kicks the
// reconciler when it left running.
func (c *Consumer) stateChange(ctx context.Context, ev ec2events.Event, log *slog.Logger) (string, error) {
	if c.o.StateChange != nil {
		if err := c.o.StateChange(ctx, ev.InstanceID, ev.State, ev.Time); err != nil {
			return OutcomeRetry, fmt.Errorf("recording %s's state %s for the ledger: %w", ev.InstanceID, ev.State, err)
		}
	}
	if !ev.Gone() {
		return OutcomeIgnored, nil
	}
	if c.o.Kick != nil {
		c.o.Kick()
	}
	log.Info("instance left running; reconciling now", "state", ev.State)
	return OutcomeReconcile, nil
}

// actOnSpot acts on a spot warning for a live spot node of the cluster:
// watches the agent that announced it, or drains, requeues or checkpoints
// the node itself.
func (c *Consumer) actOnSpot(ctx context.Context, ev ec2events.Event, key, node string, log *slog.Logger) (string, error) {
	log = log.With("node", node)
	n := interruption.Notice{Node: node, InstanceID: ev.InstanceID, Action: ev.Action, Time: ev.Time, Deadline: ev.Deadline()}
	if ev.Kind == ec2events.Rebalance {
		n.Action = "rebalance"
	}
	if c.agentAnnounced(ctx, ev) {
		if ev.Kind == ec2events.Rebalance {
			log.Info("rebalance recommendation handled by the node's agent")
			return OutcomeAgent, nil
		}
		log.Info("spot interruption handled by the node's agent; watching its deadline")
		return c.watchdog(ctx, n)
	}
	// the sizer's own record (rank avoids the pool for a while, as for an
	// agent's); made once the sizer acts, so a redelivered message after a
	// restart is taken for a notice someone handles, and watched
	record := func() {
		rec := sizerapi.Interruption{InstanceID: ev.InstanceID, Node: node, Action: n.Action, Time: ev.Time}
		if err := c.st.AddInterruption(context.WithoutCancel(ctx), rec); err != nil {
			log.Warn("recording the notice", "err", err)
		}
	}
	if ev.Kind == ec2events.Rebalance {
		record()
		log.Warn("rebalance recommendation and no word from the node's agent: draining the node")
		if _, err := c.h.Rebalance(ctx, n); err != nil {
			return OutcomeError, err
		}
		return OutcomeHandled, nil
	}
	sn, found, err := c.ops.Node(ctx, node)
	if err != nil {
		c.retry(key)
		return OutcomeRetry, fmt.Errorf("reading node %s from Slurm: %w", node, err)
	}
	if !found {
		log.Warn("EC2 event for a node Slurm does not know; ignored")
		return OutcomeNotOurs, nil
	}
	record()
	if unreachable(sn.State, sn.HasFlag) {
		log.Warn("spot interruption of a node Slurm cannot reach: requeueing its jobs without a checkpoint", "state", sn.StateString())
		if _, err := c.h.RequeueNow(ctx, n, "spot interruption of a node Slurm cannot reach"); err != nil {
			return OutcomeError, err
		}
		return OutcomeRequeued, nil
	}
	log.Warn("spot interruption and no word from the node's agent: the sizer checkpoints and requeues its jobs")
	if _, err := c.h.Interrupt(ctx, n); err != nil {
		return OutcomeError, err
	}
	return OutcomeHandled, nil
}

func unreachable(state string, hasFlag func(string) bool) bool {
	return state == "DOWN" || hasFlag("NOT_RESPONDING")
}

// agentAnnounced waits up to AgentWait for the node's agent to announce
// this notice (POST /v1/interruptions, stored by the sizer).
func (c *Consumer) agentAnnounced(ctx context.Context, ev ec2events.Event) bool {
	since := ev.Time.Add(-2 * time.Minute)
	end := c.o.Now().Add(c.o.AgentWait)
	for {
		ins, err := c.st.Interruptions(ctx, since)
		if err == nil {
			for _, in := range ins {
				if in.InstanceID != ev.InstanceID {
					continue
				}
				if (ev.Kind == ec2events.Rebalance) == (in.Action == "rebalance") && (ev.Kind == ec2events.Rebalance || slices.Contains(spotActions, in.Action)) {
					return true
				}
			}
		}
		if !c.o.Now().Before(end) || ctx.Err() != nil {
			return false
		}
		c.o.Sleep(ctx, c.o.Poll)
	}
}

// watchdog waits until shortly before EC2's deadline (after the agent's
// own, which ends Reserve before it) and requeues at once the runs that
// were on the node at the notice and are still there, if the notice's
// instance still is the node's: an agent that announced the notice and then
// died. By then the node may have a new instance running the relaunched
// job; that is never touched.
func (c *Consumer) watchdog(ctx context.Context, n interruption.Notice) (string, error) {
	seen, err := c.ops.JobsOnNode(ctx, n.Node)
	if err != nil {
		c.log.Warn("listing the node's jobs for the watchdog; leaving the notice to the agent", "node", n.Node, "err", err)
		return OutcomeAgent, nil
	}
	at := n.Deadline.Add(-c.o.Reserve / 2)
	if d := at.Sub(c.o.Now()); d > 0 {
		c.o.Sleep(ctx, d)
	}
	if ctx.Err() != nil || len(seen) == 0 {
		return OutcomeAgent, nil
	}
	insts, err := c.inst.List(ctx)
	if err != nil || !slices.ContainsFunc(insts, func(in cloud.Instance) bool { return in.ID == n.InstanceID && in.Live() && in.Node == n.Node }) {
		return OutcomeAgent, nil // the instance is gone: whatever runs on the node now is another run
	}
	jobs, err := c.ops.JobsOnNode(ctx, n.Node)
	if err != nil {
		return OutcomeAgent, nil
	}
	var still []interruption.Job
	for _, j := range jobs {
		if slices.ContainsFunc(seen, func(s interruption.Job) bool { return s.ID == j.ID && s.RestartCount == j.RestartCount }) {
			still = append(still, j)
		}
	}
	if len(still) == 0 {
		return OutcomeAgent, nil
	}
	c.log.Error("the node's agent announced a spot interruption but its jobs are still there at the deadline: requeueing them at once",
		"node", n.Node, "instance_id", n.InstanceID, "jobs", len(still))
	if _, err := c.h.RequeueRuns(ctx, n, still, "spot interruption; the node's agent did not finish by the deadline"); err != nil {
		return OutcomeAgentLate, err
	}
	return OutcomeAgentLate, nil
}

// firstSight records key; false when it was seen before.
func (c *Consumer) firstSight(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.o.Now()
	for k, t := range c.seen { // bounded: an hour of events
		if now.Sub(t) > time.Hour {
			delete(c.seen, k)
		}
	}
	if _, ok := c.seen[key]; ok {
		return false
	}
	c.seen[key] = now
	return true
}

// retry marks key to be forgotten, so the redelivered message is handled.
func (c *Consumer) retry(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[key] = time.Time{}
}

func (c *Consumer) forgetOnRetry(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.seen[key]; ok && t.IsZero() {
		delete(c.seen, key)
	}
}
