package ec2

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/cloud"
)

// describeIDs reads freshly launched instances (by filter, which does not
// fail for ids not yet visible), retrying briefly for EC2's eventual
// consistency.
func (p *Provider) describeIDs(ctx context.Context, ids []string) ([]cloud.Instance, error) {
	var got []cloud.Instance
	for attempt := 0; ; attempt++ {
		var err error
		got, err = p.describe(ctx, []types.Filter{{Name: aws.String("instance-id"), Values: ids}})
		if err != nil {
			return nil, err
		}
		if len(got) == len(ids) || attempt == 4 {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, nil
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		}
	}
}

// liveFor finds live instances of the request's nodes (idempotency).
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
	case len(req.Nodes) == 1 || !req.AllOrNothing:
		filters = append(filters, types.Filter{Name: aws.String("tag:" + TagNode), Values: names})
	case req.Nodes[0].JobID != 0:
		filters = append(filters, types.Filter{Name: aws.String("tag:" + TagJobID), Values: []string{strconv.FormatUint(uint64(req.Nodes[0].JobID), 10)}})
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
		LaunchTime: aws.ToTime(in.LaunchTime), Tags: tags, Capacity: cloud.OnDemand,
		Node: NodeOf(tags, int(aws.ToInt32(in.AmiLaunchIndex))),
	}
	if in.Placement != nil {
		c.Zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	if in.State != nil {
		c.State = string(in.State.Name)
	}
	if in.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		c.Capacity = cloud.Spot
	}
	if j, err := strconv.ParseUint(tags[TagJobID], 10, 32); err == nil {
		c.JobID = uint32(j)
	}
	return c
}
