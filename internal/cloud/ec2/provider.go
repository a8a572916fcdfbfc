// Package ec2 is burst's cloud.Provider for Amazon EC2, over a narrow EC2API
// (aws-sdk-go-v2's own method signatures).
//
// # Launching
//
// Every launch is an EC2 Fleet of type instant (CreateFleet). Overrides list
// the caller's ranked offerings with Priority = rank, allocation strategy
// capacity-optimized-prioritized for spot and prioritized for on-demand.
// Spot offerings are tried first, then on-demand (the caller's on-demand
// offerings, plus copies of the spot ones with LaunchRequest.OnDemandFallback).
// Offerings that failed with insufficient capacity within the last few
// minutes (UnavailableCache, kept in the state directory) are skipped.
//
// A multi-node all-or-nothing job is one fleet: TotalTargetCapacity =
// MinTargetCapacity = node count, SingleAvailabilityZone and
// SingleInstanceType, the placement group in every override. EC2 launches
// all the nodes or none; the provider still checks the result and terminates
// a partial one. Without AllOrNothing every node is its own fleet.
//
// # Tags and node identity
//
// Instances are tagged at launch through TagSpecifications, never
// afterwards: TagCluster, TagJobID, TagAccount, TagUser, TagClass,
// TagCapacity, and the node names. A fleet's tags apply to all of its
// instances and EC2 Fleet cannot give each instance its own user data, so a
// node learns its Slurm name from tags and its launch index:
//
//   - a single-node fleet carries TagNode = the node name;
//   - a multi-node fleet carries TagNodes = "n1,n2,..." (split over
//     TagNodes, TagNodes+".2", ... when longer than a tag value may be), and
//     the instance with ami-launch-index i is node i of that list.
//
// NodeOf implements the rule; the provider verifies after launch that the
// fleet's launch indexes are exactly 0..n-1 and otherwise terminates the
// fleet and fails (never a wrong identity). On the instance the agent reads
// /latest/meta-data/tags/instance/<key> and /latest/meta-data/ami-launch-index
// from IMDS, so the launch template must set
// MetadataOptions.InstanceMetadataTags=enabled (templates the provider
// creates do). User data common to the whole cluster comes from the launch
// template; LaunchRequest.UserData, when set, replaces it for that fleet
// (LaunchTemplateSpecificationUserData, instant fleets only).
//
// # Launch templates
//
// Either the admin names a launch template (Options.LaunchTemplateName; it
// should enable instance tags in metadata and carry the cluster tag for the
// IAM policy's conditions), or the provider ensures one from
// Options.ImageID, InstanceProfile, SecurityGroupIDs and UserData: named
// "burst-<cluster>-<hash of those>", so a configuration change makes a new
// template and an unchanged one is found with DescribeLaunchTemplates.
//
// # Idempotency
//
// Every CreateFleet carries a ClientToken derived from the cluster, the
// nodes, the job, the resume attempt and the capacity type, so a repeated
// launch (the SDK's retries, or a resume program run again for the same
// attempt) returns the first fleet instead of a new one; before launching,
// the provider also looks for live instances of the nodes and reuses them.
package ec2

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/nodeid"
)

// Tag keys burst sets on every instance at launch.
const (
	TagCluster  = "burst:cluster"       // cluster name; scopes every IAM permission
	TagNode     = nodeid.TagNode        // Slurm node name (single-node fleets)
	TagNodes    = nodeid.TagNodes       // node names of a multi-node fleet, by launch index
	TagJobID    = "burst:job-id"        // Slurm job id
	TagAccount  = "burst:account"       // Slurm account
	TagUser     = "burst:user"          // submitting user
	TagClass    = "burst:class"         // sizer class
	TagCapacity = "burst:capacity-type" // spot or on-demand
)

// EC2API is the part of the EC2 client burst uses (*ec2.Client satisfies it).
type EC2API interface {
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, optFns ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
}

// Options configures the provider. main programs map burst.yaml onto it.
type Options struct {
	Cluster string            // cluster name (TagCluster); required
	Subnets map[string]string // availability zone -> subnet id; required
	// LaunchTemplateName is an admin-made launch template used as is.
	LaunchTemplateName    string
	LaunchTemplateVersion string // default "$Default"
	// Without LaunchTemplateName, the provider ensures a template from these.
	ImageID          string
	InstanceProfile  string // name, or ARN when it starts with "arn:"
	SecurityGroupIDs []string
	UserData         string // raw common user data of the ensured template
	// ExtraTags are added to every instance (after burst's own tags).
	ExtraTags map[string]string
	// StateDir holds the unavailable-offerings cache; "" keeps it in memory.
	StateDir       string
	UnavailableTTL time.Duration // default 3 minutes
	// Concurrency bounds parallel fleets of a non-all-or-nothing request (default 8).
	Concurrency int
	Now         func() time.Time // default time.Now
	Logger      *slog.Logger     // default discards
}

// Provider implements cloud.Provider on EC2.
type Provider struct {
	api   EC2API
	opts  Options
	log   *slog.Logger
	cache *UnavailableCache

	ltMu sync.Mutex
	lt   string // ensured launch template name
}

var _ cloud.Provider = (*Provider)(nil)

// New checks opts and returns a provider.
func New(api EC2API, opts Options) (*Provider, error) {
	var probs []string
	if api == nil {
		probs = append(probs, "no EC2 client")
	}
	if opts.Cluster == "" {
		probs = append(probs, "cluster name is empty")
	}
	if len(opts.Subnets) == 0 {
		probs = append(probs, "no subnets (map each availability zone to a subnet id)")
	}
	if opts.LaunchTemplateName == "" && opts.ImageID == "" {
		probs = append(probs, "neither a launch template name nor an image id (AMI) is set")
	}
	if opts.LaunchTemplateName != "" && opts.ImageID != "" {
		probs = append(probs, "both a launch template name and an image id are set; the launch template already names its AMI, so set only one")
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("configuring the EC2 provider: %s", strings.Join(probs, "; "))
	}
	if opts.LaunchTemplateVersion == "" {
		opts.LaunchTemplateVersion = "$Default"
	}
	if opts.UnavailableTTL <= 0 {
		opts.UnavailableTTL = 3 * time.Minute
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Provider{api: api, opts: opts, log: opts.Logger,
		cache: NewUnavailableCache(opts.StateDir, opts.UnavailableTTL, opts.Now)}, nil
}

// Cache returns the provider's unavailable-offerings cache.
func (p *Provider) Cache() *UnavailableCache { return p.cache }

// NodeOf tells which Slurm node an instance is, from its tags and launch
// index (the rule of internal/nodeid); "" when it cannot be told.
func NodeOf(tags map[string]string, launchIndex int) string {
	n, err := nodeid.Of(tags, launchIndex)
	if err != nil {
		return ""
	}
	return n
}

// launchTemplate returns the template to launch from, ensuring it in AMI mode.
func (p *Provider) launchTemplate(ctx context.Context) (string, error) {
	if p.opts.LaunchTemplateName != "" {
		return p.opts.LaunchTemplateName, nil
	}
	p.ltMu.Lock()
	defer p.ltMu.Unlock()
	if p.lt != "" {
		return p.lt, nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %q", p.opts.ImageID, p.opts.InstanceProfile, p.opts.SecurityGroupIDs, p.opts.UserData)
	sum := hex.EncodeToString(h.Sum(nil))
	name := "burst-" + p.opts.Cluster + "-" + sum[:12]
	_, err := p.api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err == nil {
		p.lt = name
		return name, nil
	}
	if !cloud.IsNotFound(wrapErr(err, "", nil)) {
		return "", wrapErr(err, "looking up launch template "+name, nil)
	}
	data := &types.RequestLaunchTemplateData{
		ImageId: aws.String(p.opts.ImageID),
		MetadataOptions: &types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpTokens:           types.LaunchTemplateHttpTokensStateRequired,
			HttpEndpoint:         types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
			InstanceMetadataTags: types.LaunchTemplateInstanceMetadataTagsStateEnabled,
		},
		SecurityGroupIds: p.opts.SecurityGroupIDs,
		TagSpecifications: []types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}},
			{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}},
		},
	}
	if pr := p.opts.InstanceProfile; pr != "" {
		if strings.HasPrefix(pr, "arn:") {
			data.IamInstanceProfile = &types.LaunchTemplateIamInstanceProfileSpecificationRequest{Arn: aws.String(pr)}
		} else {
			data.IamInstanceProfile = &types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(pr)}
		}
	}
	if p.opts.UserData != "" {
		data.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(p.opts.UserData)))
	}
	_, err = p.api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
		ClientToken:        aws.String(sum[:32]),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeLaunchTemplate,
			Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}}},
	})
	var api interface{ ErrorCode() string }
	if err != nil && !(errors.As(err, &api) && api.ErrorCode() == "InvalidLaunchTemplateName.AlreadyExistsException") {
		return "", wrapErr(err, "creating launch template "+name, nil)
	}
	p.log.Info("ensured launch template", "name", name, "image", p.opts.ImageID)
	p.lt = name
	return name, nil
}

// Launch implements cloud.Provider.
func (p *Provider) Launch(ctx context.Context, req cloud.LaunchRequest) (cloud.LaunchResult, error) {
	res := cloud.LaunchResult{Failed: map[string]error{}}
	if err := p.check(req); err != nil {
		return res, err
	}
	names := make([]string, len(req.Nodes))
	for i, n := range req.Nodes {
		names[i] = n.Node
	}
	existing, err := p.liveFor(ctx, req)
	if err != nil {
		return res, err
	}
	var todo []cloud.NodeSpec
	for _, n := range req.Nodes {
		if in, ok := existing[n.Node]; ok {
			res.Instances = append(res.Instances, in)
			res.Reused = append(res.Reused, n.Node)
			continue
		}
		todo = append(todo, n)
	}
	if len(todo) == 0 {
		return res, nil
	}
	lt, err := p.launchTemplate(ctx)
	if err != nil {
		return res, err
	}
	offs := p.candidates(req)
	if req.AllOrNothing && len(res.Instances) > 0 {
		// Part of the job already runs (a node was lost): the rest must join it.
		zone := res.Instances[0].Zone
		offs = filterOfferings(offs, func(o cloud.Offering) bool { return o.Zone == zone })
	}
	if len(offs) == 0 {
		err := &cloud.Error{Kind: cloud.KindInvalid, Op: "launching " + strings.Join(names, ","),
			Message: "no offering has a subnet configured for its zone; add the zones to the provider's subnets", Offerings: req.Offerings}
		return res, p.failAll(&res, todo, err)
	}
	if req.AllOrNothing && len(todo) > 1 || len(todo) == 1 {
		ins, tried, err := p.launchGroup(ctx, lt, req, todo, offs)
		res.Tried = tried
		res.Instances = append(res.Instances, ins...)
		if err != nil {
			return res, p.failAll(&res, todo, err)
		}
		return res, nil
	}
	// Independent nodes: one fleet each, a few at a time.
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, p.opts.Concurrency)
	var lastErr error
	for _, n := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ins, tried, err := p.launchGroup(ctx, lt, req, []cloud.NodeSpec{n}, offs)
			mu.Lock()
			defer mu.Unlock()
			if len(tried) > len(res.Tried) {
				res.Tried = tried
			}
			res.Instances = append(res.Instances, ins...)
			if err != nil {
				res.Failed[n.Node] = err
				lastErr = err
			}
		}()
	}
	wg.Wait()
	if len(res.Instances) == 0 {
		return res, lastErr
	}
	return res, nil
}

// failAll records err for every node and returns it: the request failed.
func (p *Provider) failAll(res *cloud.LaunchResult, nodes []cloud.NodeSpec, err error) error {
	for _, n := range nodes {
		res.Failed[n.Node] = err
	}
	return err
}

func (p *Provider) check(req cloud.LaunchRequest) error {
	var probs []string
	if req.Cluster != "" && req.Cluster != p.opts.Cluster {
		probs = append(probs, fmt.Sprintf("request is for cluster %q but the provider manages %q", req.Cluster, p.opts.Cluster))
	}
	if len(req.Nodes) == 0 {
		probs = append(probs, "no nodes")
	}
	if len(req.Offerings) == 0 {
		probs = append(probs, "no offerings")
	}
	seen := map[string]bool{}
	for _, n := range req.Nodes {
		if n.Node == "" || strings.ContainsAny(n.Node, ", ") {
			probs = append(probs, fmt.Sprintf("bad node name %q", n.Node))
		}
		if seen[n.Node] {
			probs = append(probs, fmt.Sprintf("node %s listed twice", n.Node))
		}
		seen[n.Node] = true
	}
	for _, o := range req.Offerings {
		if !o.Capacity.Valid() || o.InstanceType == "" || o.Zone == "" {
			probs = append(probs, fmt.Sprintf("bad offering %+v (want instance type, zone and capacity spot or on-demand)", o))
		}
	}
	if len(probs) > 0 {
		return &cloud.Error{Kind: cloud.KindInvalid, Op: "checking launch request", Message: strings.Join(probs, "; ")}
	}
	return nil
}

// candidates orders the offerings: the ranked ones (spot phase, then
// on-demand phase keep their rank order), the on-demand fallback copies,
// subnets filled in, offerings without a subnet dropped.
func (p *Provider) candidates(req cloud.LaunchRequest) []cloud.Offering {
	offs := append([]cloud.Offering(nil), req.Offerings...)
	if req.OnDemandFallback {
		have := map[string]bool{}
		for _, o := range offs {
			have[o.Key()] = true
		}
		for _, o := range req.Offerings {
			if o.Capacity == cloud.Spot {
				od := o
				od.Capacity, od.PriceUSD = cloud.OnDemand, 0
				if !have[od.Key()] {
					have[od.Key()] = true
					offs = append(offs, od)
				}
			}
		}
	}
	var out []cloud.Offering
	for _, o := range offs {
		if o.SubnetID == "" {
			o.SubnetID = p.opts.Subnets[o.Zone]
		}
		if o.SubnetID == "" {
			p.log.Warn("skipping offering in a zone without a configured subnet", "offering", o.Key())
			continue
		}
		out = append(out, o)
	}
	return out
}

func filterOfferings(offs []cloud.Offering, keep func(cloud.Offering) bool) []cloud.Offering {
	var out []cloud.Offering
	for _, o := range offs {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

// launchGroup launches nodes as one fleet per capacity type phase until one
// succeeds. len(nodes) > 1 means all-or-nothing.
func (p *Provider) launchGroup(ctx context.Context, lt string, req cloud.LaunchRequest, nodes []cloud.NodeSpec, offs []cloud.Offering) ([]cloud.Instance, []cloud.Offering, error) {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node
	}
	op := "launching " + strings.Join(names, ",")
	unavailable, err := p.cache.Snapshot()
	if err != nil {
		p.log.Warn("ignoring the unavailable-offerings cache", "err", err)
		unavailable = nil
	}
	var skipped []cloud.Offering
	var phases [][]cloud.Offering
	phaseOf := map[cloud.CapacityType]int{}
	for _, o := range offs {
		if _, bad := unavailable[o.Key()]; bad {
			skipped = append(skipped, o)
			continue
		}
		i, ok := phaseOf[o.Capacity]
		if !ok {
			i = len(phases)
			phaseOf[o.Capacity] = i
			phases = append(phases, nil)
		}
		phases[i] = append(phases[i], o)
	}
	var tried []cloud.Offering
	var errs []*cloud.Error
	for _, phase := range phases {
		tried = append(tried, phase...)
		ins, ferrs, err := p.fleet(ctx, lt, req, nodes, phase)
		if err != nil {
			return nil, tried, err // a whole-call error (throttled, unauthorized...): stop here
		}
		if len(ins) == len(nodes) {
			return ins, tried, nil
		}
		errs = append(errs, ferrs...)
	}
	return nil, tried, summarize(op, errs, skipped, tried)
}

// summarize turns per-offering failures into one error for the nodes.
func summarize(op string, errs []*cloud.Error, skipped, tried []cloud.Offering) error {
	if len(errs) == 0 {
		if len(skipped) > 0 {
			return &cloud.Error{Kind: cloud.KindInsufficientCapacity, Code: "InsufficientInstanceCapacity", Op: op,
				Message: "every offering failed for lack of capacity within the last few minutes (unavailable-offerings cache)", Offerings: skipped}
		}
		return &cloud.Error{Kind: cloud.KindInsufficientCapacity, Code: "InsufficientInstanceCapacity", Op: op,
			Message: "the fleet launched no instance and gave no reason", Offerings: tried}
	}
	// Report the most common code, with every offering that failed with it.
	count := map[string]int{}
	for _, e := range errs {
		count[e.Code]++
	}
	best := errs[0].Code
	for c, n := range count {
		if n > count[best] || n == count[best] && c < best {
			best = c
		}
	}
	out := &cloud.Error{Code: best, Kind: Classify(best), Op: op}
	for _, e := range errs {
		if e.Code == best {
			out.Offerings = append(out.Offerings, e.Offerings...)
			if out.Message == "" {
				out.Message = e.Message
			}
		}
	}
	return out
}

// clientToken is stable for (cluster, nodes, job, attempt, capacity).
func (p *Provider) clientToken(req cloud.LaunchRequest, nodes []cloud.NodeSpec, capacity cloud.CapacityType) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s", p.opts.Cluster, req.Attempt, capacity)
	for _, n := range nodes {
		fmt.Fprintf(h, "\x00%s/%d", n.Node, n.JobID)
	}
	return "burst-" + hex.EncodeToString(h.Sum(nil))[:40]
}

// fleet makes one CreateFleet call for nodes over offerings of one capacity
// type. It returns the instances (all of nodes, or none), the per-offering
// errors, or a whole-call error.
func (p *Provider) fleet(ctx context.Context, lt string, req cloud.LaunchRequest, nodes []cloud.NodeSpec, offs []cloud.Offering) ([]cloud.Instance, []*cloud.Error, error) {
	n := int32(len(nodes))
	capacity := offs[0].Capacity
	names := make([]string, len(nodes))
	for i, nd := range nodes {
		names[i] = nd.Node
	}
	op := "launching " + strings.Join(names, ",")
	overrides := make([]types.FleetLaunchTemplateOverridesRequest, len(offs))
	byKey := map[string]cloud.Offering{}
	for i, o := range offs {
		overrides[i] = types.FleetLaunchTemplateOverridesRequest{
			InstanceType: types.InstanceType(o.InstanceType),
			SubnetId:     aws.String(o.SubnetID),
			Priority:     aws.Float64(float64(i)),
		}
		if req.PlacementGroup != "" && len(nodes) > 1 {
			overrides[i].Placement = &types.Placement{GroupName: aws.String(req.PlacementGroup)}
		}
		byKey[o.InstanceType+"/"+o.SubnetID] = o
	}
	spec := &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String(p.opts.LaunchTemplateVersion)}
	if req.UserData != "" {
		spec.LaunchTemplateSpecificationUserData = aws.String(base64.StdEncoding.EncodeToString([]byte(req.UserData)))
	}
	tags := p.tags(nodes, capacity)
	in := &ec2.CreateFleetInput{
		Type:        types.FleetTypeInstant,
		ClientToken: aws.String(p.clientToken(req, nodes, capacity)),
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: spec,
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(n),
			DefaultTargetCapacityType: types.DefaultTargetCapacityType(capacity),
		},
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: tags},
			{ResourceType: types.ResourceTypeFleet, Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}},
		},
	}
	var minCap *int32
	var single *bool
	if n > 1 {
		minCap, single = aws.Int32(n), aws.Bool(true)
	}
	if capacity == cloud.Spot {
		in.SpotOptions = &types.SpotOptionsRequest{
			AllocationStrategy:     types.SpotAllocationStrategyCapacityOptimizedPrioritized,
			MinTargetCapacity:      minCap,
			SingleAvailabilityZone: single,
			SingleInstanceType:     single,
		}
	} else {
		in.OnDemandOptions = &types.OnDemandOptionsRequest{
			AllocationStrategy:     types.FleetOnDemandAllocationStrategyPrioritized,
			MinTargetCapacity:      minCap,
			SingleAvailabilityZone: single,
			SingleInstanceType:     single,
		}
	}
	out, err := p.api.CreateFleet(ctx, in)
	if err != nil {
		werr := wrapErr(err, op, offs)
		if e, ok := cloud.AsError(werr); ok && e.Code == "IdempotentParameterMismatch" {
			// another resume of the same nodes and attempt (Slurm and an
			// admin, or two overlapping calls) launched with this token and
			// slightly different parameters (user data carries its issue
			// time): its instances are these nodes' instances
			live, lerr := p.liveFor(ctx, cloud.LaunchRequest{Cluster: req.Cluster, Nodes: nodes})
			if lerr == nil && len(live) == len(nodes) {
				got := make([]cloud.Instance, 0, len(nodes))
				for _, nd := range nodes {
					got = append(got, live[nd.Node])
				}
				p.log.Info("launch already made by a concurrent resume; using its instances", "nodes", names)
				return got, nil, nil
			}
		}
		return nil, nil, werr
	}
	// Per-override errors, with a nil Go error.
	var ferrs []*cloud.Error
	for _, fe := range out.Errors {
		o, ok := offeringOf(fe.LaunchTemplateAndOverrides, byKey)
		code := aws.ToString(fe.ErrorCode)
		e := &cloud.Error{Code: code, Kind: Classify(code), Message: aws.ToString(fe.ErrorMessage), Op: op}
		if ok {
			e.Offerings = []cloud.Offering{o}
			if cachesPool(code) {
				if err := p.cache.Mark(code, o); err != nil {
					p.log.Warn("recording an unavailable offering", "offering", o.Key(), "err", err)
				}
			}
		}
		ferrs = append(ferrs, e)
	}
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	if len(ids) == 0 {
		return nil, ferrs, nil
	}
	insts, err := p.describeIDs(ctx, ids)
	if err != nil {
		// The instances exist but cannot be seen: terminate rather than leak them.
		if terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
			p.log.Error("terminating instances after a failed launch", "ids", ids, "err", terr)
		}
		return nil, nil, err
	}
	if len(insts) != len(nodes) || !p.identitiesOK(insts, names) {
		// Never leave a partial all-or-nothing job, nor instances with an
		// ambiguous identity.
		if terr := p.TerminateIDs(context.WithoutCancel(ctx), ids); terr != nil {
			p.log.Error("terminating a partial fleet", "ids", ids, "err", terr)
		}
		if len(insts) != len(nodes) {
			ferrs = append(ferrs, &cloud.Error{Kind: cloud.KindInsufficientCapacity, Code: "InsufficientInstanceCapacity", Op: op,
				Message: fmt.Sprintf("the fleet launched %d of %d instances; terminated them (all-or-nothing)", len(insts), len(nodes)), Offerings: offs})
			return nil, ferrs, nil
		}
		return nil, nil, &cloud.Error{Kind: cloud.KindUnknown, Code: "AmbiguousLaunchIndex", Op: op,
			Message: "the fleet's launch indexes are not 0..n-1, so nodes cannot tell who they are; terminated the fleet"}
	}
	p.log.Info("launched", "nodes", names, "instances", ids, "capacity", capacity)
	return insts, ferrs, nil
}

func (p *Provider) identitiesOK(insts []cloud.Instance, names []string) bool {
	seen := map[string]bool{}
	for _, in := range insts {
		if in.Node == "" || seen[in.Node] {
			return false
		}
		seen[in.Node] = true
	}
	for _, n := range names {
		if !seen[n] {
			return false
		}
	}
	return true
}

func offeringOf(lto *types.LaunchTemplateAndOverridesResponse, byKey map[string]cloud.Offering) (cloud.Offering, bool) {
	if lto == nil || lto.Overrides == nil {
		return cloud.Offering{}, false
	}
	o, ok := byKey[string(lto.Overrides.InstanceType)+"/"+aws.ToString(lto.Overrides.SubnetId)]
	return o, ok
}

func (p *Provider) tags(nodes []cloud.NodeSpec, capacity cloud.CapacityType) []types.Tag {
	t := func(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }
	first := nodes[0]
	tags := []types.Tag{t(TagCluster, p.opts.Cluster), t(TagCapacity, string(capacity))}
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node
	}
	for _, nt := range nodeid.Tags(names) {
		tags = append(tags, t(nt.Key, nt.Value))
	}
	if first.JobID != 0 {
		tags = append(tags, t(TagJobID, strconv.FormatUint(uint64(first.JobID), 10)))
	}
	for k, v := range map[string]string{TagAccount: first.Account, TagUser: first.User, TagClass: first.Class} {
		if v != "" {
			tags = append(tags, t(k, v))
		}
	}
	extra := make([]string, 0, len(p.opts.ExtraTags))
	for k := range p.opts.ExtraTags {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		tags = append(tags, t(k, p.opts.ExtraTags[k]))
	}
	sort.Slice(tags, func(i, j int) bool { return *tags[i].Key < *tags[j].Key })
	return tags
}

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
