// Package ec2 is burst's cloud.Provider for Amazon EC2, over a narrow EC2API
// (aws-sdk-go-v2's own method signatures).
//
// # Launching
//
// Every launch is an EC2 Fleet of type instant (CreateFleet). Overrides list
// the caller's ranked offerings with Priority = rank; on-demand fleets use
// the prioritized strategy. Spot fleets use LaunchRequest's
// SpotAllocationStrategy, by default price-capacity-optimized (AWS's
// recommendation), which ignores priorities: under it (and every spot
// strategy but capacity-optimized-prioritized) each spot fleet holds one
// instance type's zones, the types tried in rank order, so EC2 picks the
// zone by spare capacity and price while the sizer's choice of type stands.
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
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/burst-hpc/burst/internal/cloud"
)

// EC2API is the part of the EC2 client burst uses (*ec2.Client satisfies it).
type EC2API interface {
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, optFns ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, optFns ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	// RunInstances launches into a capacity reservation (reserve.go);
	// DescribeCapacityReservations reads the reservations a class names.
	RunInstances(ctx context.Context, in *ec2.RunInstancesInput, optFns ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	// DescribeInstanceTypes reads the network cards and EFA limits of
	// the types a multi-node launch may use (netinfo.go);
	// CreatePlacementGroup ensures its cluster placement group (efa.go).
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	CreatePlacementGroup(ctx context.Context, in *ec2.CreatePlacementGroupInput, optFns ...func(*ec2.Options)) (*ec2.CreatePlacementGroupOutput, error)
	// DescribeInstanceStatus lists EC2's scheduled events (status.go).
	DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
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
	// DescribeBudget bounds how long a launch retries describing the
	// instances CreateFleet made (throttling, eventual consistency) before it
	// reports them from CreateFleet's answer; default 30 s, never past the
	// launch's context.
	DescribeBudget time.Duration
	Now            func() time.Time // default time.Now
	Logger         *slog.Logger     // default discards
}

// Provider implements cloud.Provider on EC2.
type Provider struct {
	api   EC2API
	opts  Options
	log   *slog.Logger
	cache *UnavailableCache

	ltMu sync.Mutex
	lt   string          // ensured launch template name
	efa  map[int]string  // ensured EFA launch templates by interface count
	pgs  map[string]bool // placement groups known to exist
	net  netCache
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
	if opts.DescribeBudget <= 0 {
		opts.DescribeBudget = 30 * time.Second
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
