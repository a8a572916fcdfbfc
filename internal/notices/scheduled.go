package notices

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
)

// scheduled acts on one of EC2's scheduled events (AWS Health's
// EventBridge form; instance-retirement, instance-stop, instance-reboot,
// system-reboot, system-maintenance): for each of the cluster's live
// instances it names, the node is evacuated as for a spot interruption
// whose agent is silent (internal/interruption's Evacuate: drained with a
// reason naming the event, its jobs checkpoint-signalled, waited for up to
// the handler's grace, requeued, the node handed back). Slurm then powers
// the node down (burst-suspend terminates the instance) and resumes a
// fresh instance for the requeued job, so nothing runs on the instance when
// EC2 acts. An event whose window has passed is ignored.
func (c *Consumer) scheduled(ctx context.Context, ev ec2events.Event) (string, error) {
	log := c.log.With("event", ev.ID, "kind", ev.Kind, "code", ev.Code, "not_before", ev.NotBefore)
	end := ev.NotAfter
	if end.IsZero() {
		end = ev.NotBefore
	}
	if c.o.Now().After(end) {
		log.Info("EC2 scheduled event whose window has passed; ignored")
		return OutcomeIgnored, nil
	}
	insts, err := c.inst.List(ctx)
	if err != nil {
		return OutcomeRetry, fmt.Errorf("listing the cluster's instances: %w", err)
	}
	outcome := OutcomeNotOurs
	var errs []error
	for _, id := range ev.Instances {
		key := fmt.Sprintf("%s/%s/%s/%d", ev.Kind, id, ev.Code, ev.NotBefore.Unix())
		node, live := "", false
		for _, in := range insts {
			if in.ID == id {
				node, live = in.Node, in.Live()
			}
		}
		if node == "" || !live {
			log.Info("EC2 scheduled event for an instance that is not a live node of this cluster; ignored", "instance_id", id)
			continue
		}
		if !c.firstSight(key) {
			outcome = OutcomeDuplicate
			continue
		}
		o, err := c.evacuate(ctx, ev, id, node)
		if err != nil {
			if o == OutcomeRetry {
				c.retry(key)
				c.forgetOnRetry(key)
			}
			errs = append(errs, err)
		}
		outcome = o
	}
	return outcome, errors.Join(errs...)
}

// evacuate empties one node ahead of a scheduled event.
func (c *Consumer) evacuate(ctx context.Context, ev ec2events.Event, id, node string) (string, error) {
	log := c.log.With("event", ev.ID, "code", ev.Code, "instance_id", id, "node", node)
	reason := interruption.ScheduledReason(ev.Code, id, ev.NotBefore)
	n := interruption.Notice{Node: node, InstanceID: id, Action: "scheduled-" + ev.Code, Time: ev.Time, Deadline: ev.NotBefore, Reason: reason}
	sn, found, err := c.ops.Node(ctx, node)
	if err != nil {
		return OutcomeRetry, fmt.Errorf("reading node %s from Slurm: %w", node, err)
	}
	if !found {
		log.Warn("EC2 scheduled event for a node Slurm does not know; ignored")
		return OutcomeNotOurs, nil
	}
	why := fmt.Sprintf("EC2 scheduled %s from %s", ev.Code, ev.NotBefore.UTC().Format(time.RFC3339))
	if unreachable(sn.State, sn.HasFlag) {
		log.Warn("EC2 scheduled event on a node Slurm cannot reach: requeueing its jobs without a checkpoint and handing the node back")
		if _, err := c.h.RequeueNow(ctx, n, why); err != nil {
			return OutcomeError, err
		}
		return OutcomeRequeued, nil
	}
	log.Warn("EC2 scheduled event: draining the node, checkpointing and requeueing its jobs, replacing the instance")
	if _, err := c.h.Evacuate(ctx, n, why); err != nil {
		return OutcomeError, err
	}
	return OutcomeHandled, nil
}
