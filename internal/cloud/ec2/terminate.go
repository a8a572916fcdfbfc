package ec2

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/burst-hpc/burst/internal/cloud"
)

// Terminate implements cloud.Provider.
func (p *Provider) Terminate(ctx context.Context, nodes []string) ([]cloud.Instance, error) {
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	insts, err := p.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []cloud.Instance
	var ids []string
	for _, in := range insts {
		if want[in.Node] && in.State != "shutting-down" {
			out = append(out, in)
			ids = append(ids, in.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if err := p.TerminateIDs(ctx, ids); err != nil {
		return out, err
	}
	return out, nil
}

// TerminateBatch is the most ids one TerminateInstances call takes.
const TerminateBatch = 1000

// TerminateIDs implements cloud.Provider: batches of TerminateBatch; ids
// EC2 no longer knows are dropped and the batch is retried without them.
func (p *Provider) TerminateIDs(ctx context.Context, ids []string) error {
	var errs []error
	for start := 0; start < len(ids); start += TerminateBatch {
		batch := ids[start:min(start+TerminateBatch, len(ids))]
		for len(batch) > 0 {
			_, err := p.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: batch})
			if err == nil {
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
	return errors.Join(errs...)
}
