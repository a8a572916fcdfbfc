// Package capacity names how an instance is bought: spot or on-demand,
// and the two choices that are not a purchase option themselves (a class's
// spot-then-on-demand, a job's "no preference"). One type for the job
// metadata (internal/jobmeta), burst.yaml (internal/config) and the
// provider (internal/cloud).
package capacity

import "time"

// Type is how an instance is bought.
type Type string

// The capacity types. Spot and OnDemand are what a provider launches;
// SpotThenOnDemand (a class setting) means spot first, on-demand when spot
// is unavailable; Any (a job that asks for neither) leaves it to the class.
const (
	Any              Type = ""
	Spot             Type = "spot"
	OnDemand         Type = "on-demand"
	SpotThenOnDemand Type = "spot-then-on-demand"
	// Reserved is an on-demand instance that runs in an On-Demand Capacity
	// Reservation: the reservation is paid whether used or not, so the
	// instance itself costs nothing more (its marginal price is 0).
	Reserved Type = "reserved"
)

// Launchable reports whether c is a purchase option a provider launches
// (Spot, OnDemand or Reserved).
func (c Type) Launchable() bool { return c == Spot || c == OnDemand || c == Reserved }

// The spot allocation strategies an EC2 Fleet takes (botocore's
// SpotAllocationStrategy enum): a class's spot_allocation_strategy.
// DefaultSpotStrategy is the one AWS recommends.
const (
	PriceCapacityOptimized       = "price-capacity-optimized"
	CapacityOptimizedPrioritized = "capacity-optimized-prioritized"
	CapacityOptimized            = "capacity-optimized"
	LowestPrice                  = "lowest-price"
	Diversified                  = "diversified"
	DefaultSpotStrategy          = PriceCapacityOptimized
)

// SpotStrategies lists every spot allocation strategy, the default first.
var SpotStrategies = []string{PriceCapacityOptimized, CapacityOptimizedPrioritized, CapacityOptimized, LowestPrice, Diversified}

// BlockReclaimLead is how long before a Capacity Block for ML ends that EC2
// begins terminating its instances, and BlockNoticeLead when it warns of
// it ("Forty minutes before your Capacity Block reservation ends ... any
// instances running in the reservation will begin to terminate in 10
// minutes": EC2 User Guide, "Monitor Capacity Blocks using EventBridge").
// A job runs on a block only if its time limit ends before the warning;
// whatever still runs then is checkpointed and requeued.
const (
	BlockReclaimLead = 30 * time.Minute
	BlockNoticeLead  = 40 * time.Minute
)

// BlockType is EC2's ReservationType of a Capacity Block for ML.
const BlockType = "capacity-block"
