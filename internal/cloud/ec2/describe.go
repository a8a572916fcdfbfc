package ec2

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
)

// describeLaunched reads freshly launched instances by id (by filter,
// which does not fail for ids not yet visible). It retries, with backoff,
// errors EC2 may lift (throttling, 5xx) and ids not yet visible (eventual
// consistency) for up to Options.DescribeBudget, and less when ctx ends
// sooner (it keeps a few seconds of ctx for the caller). It returns what it
// saw and the last error.
func (p *Provider) describeLaunched(ctx context.Context, ids []string) ([]cloud.Instance, error) {
	end := p.opts.Now().Add(p.opts.DescribeBudget)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-describeReserve).Before(end) {
		end = dl.Add(-describeReserve)
	}
	wait := 100 * time.Millisecond
	var got []cloud.Instance
	for attempt := 1; ; attempt++ {
		insts, err := p.describe(ctx, []types.Filter{{Name: aws.String("instance-id"), Values: ids}})
		if err == nil {
			got = insts
			if len(got) == len(ids) {
				return got, nil
			}
		} else if k := cloud.KindOf(err); k != cloud.KindThrottled && k != cloud.KindUnknown {
			return got, err // permissions, a bad request: waiting changes nothing
		}
		if ctx.Err() != nil || !p.opts.Now().Add(wait).Before(end) {
			if err == nil {
				err = fmt.Errorf("describing launched instances: %d of %d visible after %d attempts", len(got), len(ids), attempt)
			}
			return got, err
		}
		if err != nil {
			p.log.Info("describing launched instances failed; retrying", "attempt", attempt, "wait", wait, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 4*time.Second)
	}
}

// describeReserve is the part of a launch's context the describe after a
// launch leaves to its caller (to report the launch to Slurm).
const describeReserve = 5 * time.Second

// liveFor finds live instances of the request's nodes (idempotency): by
// job for an all-or-nothing job, which finds the job's multi-node fleets
// (their instances carry the fleet's node list, TagNodes, not a TagNode of
// their own) also when only one of its nodes is asked for (a later call of
// a partial resume); by node tag otherwise.
func (p *Provider) liveFor(ctx context.Context, req cloud.LaunchRequest) (map[string]cloud.Instance, error) {
	filters := []types.Filter{
		{Name: aws.String("tag:" + TagCluster), Values: []string{p.opts.Cluster}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}
	names := make([]string, len(req.Nodes))
	for i, n := range req.Nodes {
		names[i] = n.Node
	}
	switch {
	case req.AllOrNothing && req.Nodes[0].JobID != 0:
		filters = append(filters, types.Filter{Name: aws.String("tag:" + TagJobID), Values: []string{strconv.FormatUint(uint64(req.Nodes[0].JobID), 10)}})
	case len(req.Nodes) == 1 || !req.AllOrNothing:
		filters = append(filters, types.Filter{Name: aws.String("tag:" + TagNode), Values: names})
	}
	insts, err := p.describe(ctx, filters)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]cloud.Instance{}
	for _, in := range insts {
		if want[in.Node] {
			out[in.Node] = in
		}
	}
	return out, nil
}

// List implements cloud.Provider: the cluster's instances that are not terminated.
func (p *Provider) List(ctx context.Context) ([]cloud.Instance, error) {
	return p.describe(ctx, []types.Filter{
		{Name: aws.String("tag:" + TagCluster), Values: []string{p.opts.Cluster}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "shutting-down", "stopping", "stopped"}},
	})
}

// ListAll is List with the terminated instances EC2 still shows (for
// about an hour after they end), with their state reasons and transition
// times: what the spend ledger reconciles against.
func (p *Provider) ListAll(ctx context.Context) ([]cloud.Instance, error) {
	return p.describe(ctx, []types.Filter{{Name: aws.String("tag:" + TagCluster), Values: []string{p.opts.Cluster}}})
}

// Describe returns the given instances as EC2 shows them now (terminated
// ones included while EC2 keeps them); ids EC2 no longer knows are left
// out.
func (p *Provider) Describe(ctx context.Context, ids []string) ([]cloud.Instance, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return p.describe(ctx, []types.Filter{{Name: aws.String("instance-id"), Values: ids},
		{Name: aws.String("tag:" + TagCluster), Values: []string{p.opts.Cluster}}})
}

func (p *Provider) describe(ctx context.Context, filters []types.Filter) ([]cloud.Instance, error) {
	pg := ec2.NewDescribeInstancesPaginator(p.api, &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(1000)})
	var out []cloud.Instance
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrapErr(err, "describing instances of cluster "+p.opts.Cluster, nil)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				out = append(out, convert(in))
			}
		}
	}
	return out, nil
}

func convert(in types.Instance) cloud.Instance {
	tags := make(map[string]string, len(in.Tags))
	for _, t := range in.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	c := cloud.Instance{
		ID: aws.ToString(in.InstanceId), InstanceType: string(in.InstanceType), PrivateIP: aws.ToString(in.PrivateIpAddress),
		LaunchTime: aws.ToTime(in.LaunchTime), Tags: tags, Capacity: capacity.OnDemand,
		Node: NodeOf(tags),
	}
	if in.Placement != nil {
		c.Zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	if in.State != nil {
		c.State = string(in.State.Name)
	}
	c.ClientToken = aws.ToString(in.ClientToken)
	if in.StateReason != nil {
		c.StateReason = aws.ToString(in.StateReason.Code)
	}
	if c.State != "pending" && c.State != "running" {
		if _, at, ok := ParseTransitionReason(aws.ToString(in.StateTransitionReason)); ok {
			c.StateChanged = at
		}
	}
	if in.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		c.Capacity = capacity.Spot
	}
	if r := aws.ToString(in.CapacityReservationId); r != "" {
		// EC2 ran it in a reservation (targeted by burst, or an open one
		// that matched an on-demand launch): the reservation pays
		c.Capacity, c.Reservation = capacity.Reserved, r
	}
	if j, err := strconv.ParseUint(tags[TagJobID], 10, 32); err == nil {
		c.JobID = uint32(j)
	}
	return c
}
