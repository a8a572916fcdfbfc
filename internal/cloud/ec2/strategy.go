package ec2

import (
	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
)

// spotStrategy is the request's spot allocation strategy, the default when unset.
func spotStrategy(req cloud.LaunchRequest) string {
	if req.SpotAllocationStrategy == "" {
		return capacity.DefaultSpotStrategy
	}
	return req.SpotAllocationStrategy
}

// phaseKey groups offerings into fleets. Only capacity-optimized-prioritized
// honours the overrides' priorities; under every other spot strategy EC2
// picks among a fleet's overrides by its own rule (price-capacity-optimized:
// the pools with the most spare capacity, the cheapest of those), which
// would throw away the sizer's ranking of instance types. So those spot
// fleets each hold one instance type (EC2 chooses its zone), tried in rank
// order; on-demand fleets are prioritized and hold the whole phase.
//
// A reserved offering is a phase of its own: one RunInstances into its
// reservation (reserve.go).
func phaseKey(strategy string, o cloud.Offering) string {
	if o.Capacity == capacity.Reserved {
		return string(o.Capacity) + "/" + o.Reservation + "/" + o.InstanceType + "/" + o.Zone
	}
	if o.Capacity == capacity.Spot && strategy != capacity.CapacityOptimizedPrioritized {
		return string(o.Capacity) + "/" + o.InstanceType
	}
	return string(o.Capacity)
}
