package ec2emu

import (
	"slices"
	"sort"
	"strings"
)

// The allocation strategies CreateFleet takes (botocore's
// SpotAllocationStrategy and FleetOnDemandAllocationStrategy enums; EC2
// also still takes the older camel-case spellings).
var (
	spotStrategies     = []string{"lowest-price", "diversified", "capacity-optimized", "capacity-optimized-prioritized", "price-capacity-optimized", "lowestPrice", "capacityOptimized", "capacityOptimizedPrioritized"}
	onDemandStrategies = []string{"lowest-price", "prioritized", "lowestPrice"}
)

// checkStrategy refuses an allocation strategy the fleet's options do not
// take, as EC2 does (an unset one is EC2's default).
func checkStrategy(capType, strategy string) *apiError {
	if strategy == "" {
		return nil
	}
	valid := spotStrategies
	if capType == "on-demand" {
		valid = onDemandStrategies
	}
	if !slices.Contains(valid, strategy) {
		return invalid("The allocation strategy '%s' is not valid for %s capacity; valid values are %s", strategy, capType, strings.Join(valid, ", "))
	}
	return nil
}

// orderPriceCapacity sorts spot overrides as price-capacity-optimized
// does: EC2 identifies the pools with the most capacity available for the
// instances launching, then takes the lowest-priced of those; overrides'
// priorities play no part. The emulator's "most capacity" is a pool that
// can take all need instances (or is unlimited); among pools alike, the
// cheaper first, then request order.
func (s *Server) orderPriceCapacity(ovs []*override, need int) {
	fits := func(o *override) bool { return o.avail < 0 || o.avail >= need }
	price := map[*override]float64{}
	for _, o := range ovs {
		price[o] = s.spotPrice(o.typ, o.zone)
	}
	sort.SliceStable(ovs, func(i, j int) bool {
		a, b := ovs[i], ovs[j]
		if fits(a) != fits(b) {
			return fits(a)
		}
		if price[a] != price[b] {
			return price[a] < price[b]
		}
		return a.pos < b.pos
	})
}
