// Package cloud is burst's provider-neutral view of a compute cloud: the
// offerings a node can be launched on, the Provider interface that launches,
// lists and terminates a cluster's instances, and typed errors that the
// resume program turns into Slurm node reasons.
//
// The only implementation today is internal/cloud/ec2 (EC2 CreateFleet).
package cloud

import (
	"context"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
)

// Offering is one pool a node can be launched in: instance type x
// availability zone x capacity type, with its expected hourly price. The
// sizing policy ranks offerings (with ExpectedUSD and Reason), the sizer
// sends them on the wire (sizerapi.RankResponse) and the provider launches
// them (with SubnetID, set at launch from burst.yaml, never on the wire).
type Offering struct {
	InstanceType string        `json:"instance_type"`  // e.g. "g5.xlarge"
	Zone         string        `json:"zone,omitempty"` // availability zone, e.g. "us-east-1a"
	SubnetID     string        `json:"-"`              // subnet in Zone; "" lets the provider pick its subnet for Zone
	Capacity     capacity.Type `json:"capacity"`       // spot or on-demand
	PriceUSD     float64       `json:"price_usd"`      // expected USD per instance-hour; 0 when unknown
	ExpectedUSD  float64       `json:"expected_usd"`   // per instance-hour of useful work, after spot rework
	Reason       string        `json:"reason"`         // why the policy ranked it so
	// Reservation, for Capacity Reserved, is the capacity reservation to
	// launch into: its id (cr-...) or a resource group's ARN.
	Reservation string `json:"reservation,omitempty"`
	// BlockEnd, when set, says Reservation is a Capacity Block for ML that
	// ends then: the launch uses the capacity-block market type and tags
	// the instances with the end, which their agent watches.
	BlockEnd time.Time `json:"block_end,omitzero"`
}

// Key identifies the pool ("g5.xlarge/us-east-1a/spot"; a reserved one
// adds its reservation, "p5.48xlarge/us-east-1a/reserved/cr-0123...").
func (o Offering) Key() string {
	k := o.InstanceType + "/" + o.Zone + "/" + string(o.Capacity)
	if o.Reservation != "" {
		k += "/" + o.Reservation
	}
	return k
}

// String is Key.
func (o Offering) String() string { return o.Key() }

// NodeSpec is one Slurm node to launch.
type NodeSpec struct {
	Node    string // Slurm node name, e.g. "gpu-3"
	JobID   uint32 // Slurm job the node is launched for; 0 when none
	Account string // Slurm account (budgets)
	User    string // submitting user
	Class   string // sizer class of the job
}

// LaunchRequest asks for one instance per node of one job.
//
// Nodes of one request share a job: with AllOrNothing, the provider
// launches every node in a single zone (and placement group when given) or
// none. Without it, each node is launched independently.
type LaunchRequest struct {
	Cluster   string     // cluster name; must match the provider's (safety check)
	Nodes     []NodeSpec // at least one
	Offerings []Offering // ranked best first; at least one
	// OnDemandFallback adds, after the ranked offerings, an on-demand copy of
	// every spot offering not already offered on-demand.
	OnDemandFallback bool
	// SpotAllocationStrategy is CreateFleet's spot allocation strategy
	// (the class's spot_allocation_strategy); "" is the provider's default,
	// price-capacity-optimized.
	SpotAllocationStrategy string
	// AllOrNothing: every node gets an instance or none is left running.
	AllOrNothing bool
	// PlacementGroup is an existing cluster placement group for
	// all-or-nothing launches; "" for none.
	PlacementGroup string
	// Attempt is the resume attempt for these nodes (Slurm may resume a
	// node again after ResumeTimeout). Together with the node names it makes
	// the launch idempotent: repeating the same attempt never creates a
	// second instance.
	Attempt int
	// UserData is raw (not base64) user data common to every node of the
	// request; "" keeps the launch template's. See the ec2 package for how a
	// node learns its own name.
	UserData string
	// Intent, when set, is called right before every launch call with the
	// call's idempotency token, its nodes and offerings (the spend
	// ledger's write-ahead record). An error stops that launch.
	Intent func(token string, nodes []NodeSpec, offerings []Offering) error
}

// Candidates are the offerings a provider tries for req, in order: the
// ranked ones and, with OnDemandFallback, after them an on-demand copy
// (price unknown) of every spot offering not already offered on-demand.
func (req LaunchRequest) Candidates() []Offering {
	offs := append([]Offering(nil), req.Offerings...)
	if !req.OnDemandFallback {
		return offs
	}
	have := map[string]bool{}
	for _, o := range offs {
		have[o.Key()] = true
	}
	for _, o := range req.Offerings {
		if o.Capacity == capacity.Spot {
			od := o
			od.Capacity, od.PriceUSD = capacity.OnDemand, 0
			if !have[od.Key()] {
				have[od.Key()] = true
				offs = append(offs, od)
			}
		}
	}
	return offs
}

// Reservation is an On-Demand Capacity Reservation as the cloud describes it.
type Reservation struct {
	ID           string
	InstanceType string
	Zone         string
	Total        int    // instances reserved
	Available    int    // of those, not in use now
	State        string // active, expired, cancelled, pending, ...
	Match        string // open or targeted
	Start, End   time.Time
	// Type is EC2's ReservationType: default (an On-Demand Capacity
	// Reservation) or capacity-block (capacity.BlockType).
	Type string
}

// Instance is a cluster instance as the provider sees it.
type Instance struct {
	ID           string
	Node         string // Slurm node name; "" when it cannot be told
	InstanceType string
	Zone         string
	PrivateIP    string
	State        string // pending, running, shutting-down, terminated, stopping, stopped
	Capacity     capacity.Type
	LaunchTime   time.Time // when it last entered pending (EC2's LaunchTime)
	JobID        uint32
	Tags         map[string]string
	ClientToken  string
	// StateReason is EC2's StateReason code of the last stop or
	// termination ("Client.UserInitiatedShutdown",
	// "Server.SpotInstanceTermination", ...); "" while it runs.
	StateReason string
	// StateChanged is when the instance began its last stop or termination,
	// from EC2's StateTransitionReason; zero when EC2 gave no time.
	StateChanged time.Time
	// Reservation is the capacity reservation the instance runs in (EC2's
	// CapacityReservationId); "" for none. Capacity is then Reserved.
	Reservation string
	// Unconfirmed: the launch succeeded but DescribeInstances did not answer
	// in time, so the instance comes from the launch call's own answer: no
	// PrivateIP, and in a multi-node launch Node is a best guess (the
	// instance itself reads its node from its tags and launch index).
	Unconfirmed bool
}

// Live reports whether the instance is pending or running (counts as the
// node's instance).
func (i Instance) Live() bool { return i.State == "pending" || i.State == "running" }

// LaunchResult reports what a Launch did.
type LaunchResult struct {
	Instances []Instance       // one per launched (or already running) node
	Failed    map[string]error // node -> why it got no instance (*Error)
	Tried     []Offering       // offerings attempted, in order
	Reused    []string         // nodes whose instance already existed (idempotent repeat)
}

// Reuse puts the live instance of every node of nodes that has one (live
// maps node names to them) into r as reused, and returns the nodes still to
// launch: a repeated launch never starts a second instance for a node.
func (r *LaunchResult) Reuse(nodes []NodeSpec, live map[string]Instance) (todo []NodeSpec) {
	for _, n := range nodes {
		if in, ok := live[n.Node]; ok {
			r.Instances = append(r.Instances, in)
			r.Reused = append(r.Reused, n.Node)
			continue
		}
		todo = append(todo, n)
	}
	return todo
}

// Provider launches, lists and terminates one cluster's instances.
type Provider interface {
	// Launch starts an instance for every node of req that has no live
	// instance yet. It returns a non-nil error when the request failed: a
	// node of an all-or-nothing or single-node request got no instance, or
	// no node of an independent request did. The error is an *Error when
	// the cloud said why. Per-node failures are in LaunchResult.Failed.
	Launch(ctx context.Context, req LaunchRequest) (LaunchResult, error)
	// Terminate terminates the live instances of the given nodes and returns
	// those the cloud accepted to terminate (never one whose call failed).
	// Nodes without an instance are ignored.
	Terminate(ctx context.Context, nodes []string) ([]Instance, error)
	// TerminateIDs terminates instances by id and returns the ids the cloud
	// accepted; ids that no longer exist are ignored (and not returned).
	TerminateIDs(ctx context.Context, ids []string) ([]string, error)
	// List returns the cluster's instances that are not terminated.
	List(ctx context.Context) ([]Instance, error)
}

// Reason formats err as a Slurm node reason: "burst: <what>", at most 120
// bytes, e.g. "burst: InsufficientInstanceCapacity for g5.xlarge,g6.xlarge
// spot in us-east-1a".
func Reason(err error) string {
	if err == nil {
		return ""
	}
	s := "burst: " + err.Error()
	if e, ok := AsError(err); ok {
		s = "burst: " + e.Summary()
	}
	const max = 120
	if len(s) > max {
		s = s[:max-3] + "..."
	}
	return s
}
