package ec2

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
)

// reserved launches nodes into one capacity reservation (offering o of
// capacity Reserved): one RunInstances with MinCount = MaxCount = the node
// count, targeting the reservation by id or by its resource group's ARN
// (CapacityReservationSpecification.CapacityReservationTarget). EC2 Fleet
// has no per-request reservation target (a fleet reaches targeted
// reservations only through its launch template), while RunInstances
// takes one and launches all the nodes or none. A reservation without room
// answers ReservationCapacityExceeded: a per-offering error, so the next
// phase (spot, on-demand) is tried, as the class's order says.
func (p *Provider) reserved(ctx context.Context, lt string, req cloud.LaunchRequest, nodes []cloud.NodeSpec, o cloud.Offering, phase string) ([]cloud.Instance, []*cloud.Error, error) {
	names := make([]string, len(nodes))
	for i, nd := range nodes {
		names[i] = nd.Node
	}
	op := "launching " + strings.Join(names, ",") + " into capacity reservation " + o.Reservation
	in, err := p.reservedInput(ctx, lt, req, nodes, o, phase)
	if err != nil {
		return nil, nil, err
	}
	if req.Intent != nil {
		if err := req.Intent(aws.ToString(in.ClientToken), nodes, []cloud.Offering{o}); err != nil {
			return nil, nil, &cloud.Error{Kind: cloud.KindInvalid, Code: "LaunchIntentNotJournaled", Op: op, Message: "not launching without a journaled launch intent: " + err.Error()}
		}
	}
	out, err := p.api.RunInstances(ctx, in)
	if err != nil {
		werr := wrapErr(err, op, []cloud.Offering{o})
		if e, ok := cloud.AsError(werr); ok && (e.Kind == cloud.KindInsufficientCapacity || e.Kind == cloud.KindNotFound) {
			// full, expired or gone: this offering failed, the next may not
			return nil, []*cloud.Error{e}, nil
		}
		// a whole-call failure may still have launched (see fleet)
		p.abandon(context.WithoutCancel(ctx), nodes, capacity.Reserved, names)
		return nil, nil, werr
	}
	ids := make([]string, 0, len(out.Instances))
	answer := map[string]cloud.Instance{}
	for _, x := range out.Instances {
		c := convert(x)
		ids = append(ids, c.ID)
		answer[c.ID] = c
	}
	if len(ids) != len(nodes) {
		p.log.Warn("partial reserved launch terminated (all-or-nothing)", "nodes", names, "launched", len(ids), "wanted", len(nodes))
		if len(ids) > 0 {
			if _, terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
				p.log.Error("terminating a partial reserved launch", "ids", ids, "err", terr)
			}
		}
		return nil, []*cloud.Error{{Kind: cloud.KindInsufficientCapacity, Code: "ReservationCapacityExceeded", Op: op,
			Message: "the reservation launched fewer instances than nodes; terminated them (all-or-nothing)", Offerings: []cloud.Offering{o}}}, nil
	}
	insts, err := p.settleReserved(ctx, ids, answer, names, o, op)
	return insts, nil, err
}

// reservedInput is the RunInstances request of a reserved launch: the
// reservation as its target (by id or by resource group), a Capacity
// Block's market type, the user data and the placement group.
func (p *Provider) reservedInput(ctx context.Context, lt string, req cloud.LaunchRequest, nodes []cloud.NodeSpec, o cloud.Offering, phase string) (*ec2.RunInstancesInput, error) {
	n := int32(len(nodes))
	target := &types.CapacityReservationTarget{}
	if strings.HasPrefix(o.Reservation, "arn:") {
		target.CapacityReservationResourceGroupArn = aws.String(o.Reservation)
	} else {
		target.CapacityReservationId = aws.String(o.Reservation)
	}
	in := &ec2.RunInstancesInput{
		MinCount: aws.Int32(n), MaxCount: aws.Int32(n),
		LaunchTemplate:                   &types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(lt), Version: aws.String(p.opts.LaunchTemplateVersion)},
		InstanceType:                     types.InstanceType(o.InstanceType),
		SubnetId:                         aws.String(o.SubnetID),
		ClientToken:                      aws.String(p.clientToken(req, nodes, phase)),
		CapacityReservationSpecification: &types.CapacityReservationSpecification{CapacityReservationTarget: target},
		TagSpecifications:                []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: p.tags(nodes, capacity.Reserved)}},
	}
	if !o.BlockEnd.IsZero() {
		// a Capacity Block takes only its own market type (EC2 User Guide,
		// "Launch instances using Capacity Blocks")
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeCapacityBlock}
		in.TagSpecifications[0].Tags = append(in.TagSpecifications[0].Tags,
			types.Tag{Key: aws.String(TagBlockEnd), Value: aws.String(o.BlockEnd.UTC().Format(time.RFC3339))})
	}
	if req.UserData != "" {
		in.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(req.UserData)))
	}
	if len(nodes) > 1 {
		if err := p.reservedNetwork(ctx, req, o, in); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// reservedNetwork gives a multi-node reserved launch what a fleet's gets
// (efa.go): on an EFA-capable type (and burst's own launch template), one
// EFA interface per network card, from burst's EFA template with the
// interfaces in the request itself, each in the offering's subnet (EC2
// takes no instance-level subnet beside network interfaces, and the
// template's interfaces have none), and the nodes in a cluster placement
// group: the class's, or for an On-Demand Capacity Reservation with EFA
// burst's own for the zone (a reservation's capacity is used by a
// matching instance in a placement group too: EC2 User Guide, "Placement
// group rules and limitations"). A Capacity Block gets the class's group
// only: EC2 places a block's instances itself.
func (p *Provider) reservedNetwork(ctx context.Context, req cloud.LaunchRequest, o cloud.Offering, in *ec2.RunInstancesInput) error {
	efa := 0
	if p.opts.LaunchTemplateName == "" {
		net, err := p.Network(ctx, []string{o.InstanceType})
		if err != nil {
			return err
		}
		efa = net[o.InstanceType].EFAInterfaces()
	}
	if efa > 0 {
		name, err := p.efaTemplate(ctx, efa)
		if err != nil {
			return err
		}
		in.LaunchTemplate = &types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(name), Version: aws.String("$Default")}
		in.NetworkInterfaces = efaRunInterfaces(efa, o.SubnetID, p.opts.SecurityGroupIDs)
		in.SubnetId = nil
		p.log.Info("multi-node launch with EFA interfaces", "types", fmt.Sprintf("%s:%d", o.InstanceType, efa), "reservation", o.Reservation)
	}
	g, err := p.placementGroup(ctx, req, o.Zone, efa > 0 && o.BlockEnd.IsZero())
	if err != nil {
		return err
	}
	if g != "" {
		in.Placement = &types.Placement{GroupName: aws.String(g)}
	}
	return nil
}

// settleReserved confirms the launched instances (described, or
// RunInstances' answer), names each with its node and marks them reserved
// in o's reservation; instances it cannot name are terminated.
func (p *Provider) settleReserved(ctx context.Context, ids []string, answer map[string]cloud.Instance, names []string, o cloud.Offering, op string) ([]cloud.Instance, error) {
	insts, derr := p.describeLaunched(ctx, ids)
	described := derr == nil && len(insts) == len(ids)
	if !described {
		// RunInstances' own answer is a whole instance record
		p.log.Warn("launched into a reservation, but describing the new instances failed; using RunInstances' answer", "nodes", names, "instances", ids, "err", derr)
		insts = insts[:0]
		now := p.opts.Now()
		for _, id := range ids {
			c := answer[id]
			c.Unconfirmed = true
			if c.LaunchTime.IsZero() {
				c.LaunchTime = now
			}
			insts = append(insts, c)
		}
	}
	if len(names) > 1 {
		if err := p.nameFleet(ctx, insts, names); err != nil {
			if _, terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
				p.log.Error("terminating reserved instances that could not be named", "ids", ids, "err", terr)
			}
			return nil, wrapErr(err, op+": tagging each instance with its node", []cloud.Offering{o})
		}
	} else if insts[0].Node == "" {
		insts[0].Node = names[0]
	}
	if described && !p.identitiesOK(insts, names) {
		if _, terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
			p.log.Error("terminating reserved instances with ambiguous identities", "ids", ids, "err", terr)
		}
		return nil, &cloud.Error{Kind: cloud.KindUnknown, Code: "AmbiguousNodeTags", Op: op,
			Message: "the reserved instances do not carry one node tag each; terminated them"}
	}
	for i := range insts {
		insts[i].Capacity = capacity.Reserved
		if insts[i].Reservation == "" {
			insts[i].Reservation = o.Reservation
		}
	}
	p.log.Info("launched into a capacity reservation", "nodes", names, "instances", ids, "reservation", o.Reservation, "described", described)
	return insts, nil
}

// Reservations describes capacity reservations by id (DescribeCapacityReservations).
func (p *Provider) Reservations(ctx context.Context, ids []string) ([]cloud.Reservation, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	out, err := p.describeReservations(ctx, ids)
	var api smithy.APIError
	if err == nil || !errors.As(err, &api) || api.ErrorCode() != "InvalidCapacityReservationId.NotFound" {
		return out, err
	}
	// EC2 fails the whole call when one id is unknown (a typo in
	// burst.yaml, a reservation deleted long ago): ask for each, and leave
	// out the ones it does not know (the caller sees them missing)
	out = nil
	for _, id := range ids {
		rs, err := p.describeReservations(ctx, []string{id})
		if errors.As(err, &api) && api.ErrorCode() == "InvalidCapacityReservationId.NotFound" {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

func (p *Provider) describeReservations(ctx context.Context, ids []string) ([]cloud.Reservation, error) {
	pg := ec2.NewDescribeCapacityReservationsPaginator(p.api, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: ids})
	var out []cloud.Reservation
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, wrapErr(err, "describing capacity reservations "+strings.Join(ids, ","), nil)
		}
		for _, r := range page.CapacityReservations {
			out = append(out, cloud.Reservation{ID: aws.ToString(r.CapacityReservationId), InstanceType: aws.ToString(r.InstanceType),
				Zone: aws.ToString(r.AvailabilityZone), Total: int(aws.ToInt32(r.TotalInstanceCount)), Available: int(aws.ToInt32(r.AvailableInstanceCount)),
				State: string(r.State), Match: string(r.InstanceMatchCriteria), Start: aws.ToTime(r.StartDate), End: aws.ToTime(r.EndDate),
				Type: string(r.ReservationType)})
		}
	}
	return out, nil
}
