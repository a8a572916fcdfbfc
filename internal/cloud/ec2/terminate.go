package ec2

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/burst-hpc/burst/internal/cloud"
)

// Terminate implements cloud.Provider: it returns only the instances EC2
// accepted to terminate (TerminateInstances answered for them), so a
// failed call never counts as a termination; the error says what failed.
func (p *Provider) Terminate(ctx context.Context, nodes []string) ([]cloud.Instance, error) {
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	insts, err := p.List(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]cloud.Instance{}
	var ids []string
	for _, in := range insts {
		if want[in.Node] && in.State != "shutting-down" {
			byID[in.ID] = in
			ids = append(ids, in.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	done, err := p.TerminateIDs(ctx, ids)
	out := make([]cloud.Instance, 0, len(done))
	for _, id := range done {
		if in, ok := byID[id]; ok {
			out = append(out, in)
		}
	}
	return out, err
}

// TerminateBatch is the most ids one TerminateInstances call takes.
const TerminateBatch = 1000

// TerminateIDs implements cloud.Provider: batches of TerminateBatch; ids
// EC2 no longer knows are dropped and the batch is retried without them.
// It returns the ids EC2 accepted (listed in TerminateInstances' answer).
func (p *Provider) TerminateIDs(ctx context.Context, ids []string) ([]string, error) {
	var errs []error
	var done []string
	for start := 0; start < len(ids); start += TerminateBatch {
		batch := ids[start:min(start+TerminateBatch, len(ids))]
		for len(batch) > 0 {
			out, err := p.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: batch})
			if err == nil {
				asked := map[string]bool{}
				for _, id := range batch {
					asked[id] = true
				}
				for _, sc := range out.TerminatingInstances {
					if id := aws.ToString(sc.InstanceId); asked[id] {
						done = append(done, id)
					}
				}
				break
			}
			gone := missingInstanceIDs(err)
			if len(gone) == 0 {
				errs = append(errs, wrapErr(err, fmt.Sprintf("terminating %d instances (%s...)", len(batch), batch[0]), nil))
				break
			}
			drop := map[string]bool{}
			for _, id := range gone {
				drop[id] = true
			}
			kept := batch[:0:0]
			for _, id := range batch {
				if !drop[id] {
					kept = append(kept, id)
				}
			}
			if len(kept) == len(batch) { // the message named no id of ours
				errs = append(errs, wrapErr(err, "terminating instances", nil))
				break
			}
			batch = kept
		}
	}
	return done, errors.Join(errs...)
}
