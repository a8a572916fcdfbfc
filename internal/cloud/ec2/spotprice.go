package ec2

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// SpotPrice returns the spot price (USD per hour, Linux/UNIX) of a pool in
// effect at the given time, from EC2's spot price history: what EC2
// charges a spot instance of that pool that started running then. ok is
// false when EC2 has no price for the pool.
func (p *Provider) SpotPrice(ctx context.Context, instanceType, zone string, at time.Time) (price float64, ok bool, err error) {
	in := &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       []types.InstanceType{types.InstanceType(instanceType)},
		AvailabilityZone:    aws.String(zone),
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           aws.Time(at),
		EndTime:             aws.Time(at),
	}
	out, err := p.api.DescribeSpotPriceHistory(ctx, in)
	if err != nil {
		return 0, false, wrapErr(err, fmt.Sprintf("reading the spot price of %s in %s", instanceType, zone), nil)
	}
	// the newest price that took effect at or before at; failing that (a
	// history that starts later), the earliest one
	hs := out.SpotPriceHistory
	sort.Slice(hs, func(i, j int) bool { return aws.ToTime(hs[i].Timestamp).After(aws.ToTime(hs[j].Timestamp)) })
	best, found := 0.0, false
	for _, h := range hs {
		v, err := strconv.ParseFloat(aws.ToString(h.SpotPrice), 64)
		if err != nil || v <= 0 || h.AvailabilityZone != nil && aws.ToString(h.AvailabilityZone) != zone {
			continue
		}
		best, found = v, true
		if ts := aws.ToTime(h.Timestamp); ts.IsZero() || !ts.After(at) {
			break
		}
	}
	return best, found, nil
}
