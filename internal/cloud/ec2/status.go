package ec2

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/ec2events"
)

// ScheduledEvents lists the scheduled events of the account's running
// instances in the region (DescribeInstanceStatus filtered by event code,
// so only instances with one come back, whatever the fleet's size); the
// caller keeps its cluster's. Completed and canceled events are listed
// too (their descriptions say so: ec2events.FromStatus).
func (p *Provider) ScheduledEvents(ctx context.Context) ([]ec2events.StatusEvent, error) {
	pg := ec2.NewDescribeInstanceStatusPaginator(p.api, &ec2.DescribeInstanceStatusInput{
		Filters: []types.Filter{{Name: aws.String("event.code"), Values: ec2events.StatusCodes}}})
	var out []ec2events.StatusEvent
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrapErr(err, "describing the instances' scheduled events", nil)
		}
		for _, st := range page.InstanceStatuses {
			for _, e := range st.Events {
				out = append(out, ec2events.StatusEvent{InstanceID: aws.ToString(st.InstanceId), EventID: aws.ToString(e.InstanceEventId),
					Code: string(e.Code), Description: aws.ToString(e.Description), NotBefore: aws.ToTime(e.NotBefore), NotAfter: aws.ToTime(e.NotAfter)})
			}
		}
	}
	return out, nil
}
