package config

import (
	"fmt"
	"math"
	"regexp"
)

var (
	capacityReservationRe = regexp.MustCompile(`^cr-[0-9a-f]{8}([0-9a-f]{9})?$`)
	resourceGroupARNRe    = regexp.MustCompile(`^arn:aws(-[a-z]+)*:resource-groups:[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9_.-]{1,300}$`)
)

// validateReservations checks a class's capacity reservations.
func validateReservations(v *validator, path string, r Reservations) {
	seen := map[string]bool{}
	for i, id := range r.IDs {
		p := fmt.Sprintf("%s.ids[%d]", path, i)
		switch {
		case !capacityReservationRe.MatchString(id):
			v.add(p, "%q is not a capacity reservation id (cr- and 8 or 17 hex digits, as `aws ec2 describe-capacity-reservations` lists them)", id)
		case seen[id]:
			v.add(p, "%s is listed twice", id)
		}
		seen[id] = true
	}
	if r.ResourceGroupARN != "" && !resourceGroupARNRe.MatchString(r.ResourceGroupARN) {
		v.add(path+".resource_group_arn", "%q is not a resource group ARN (arn:aws:resource-groups:<region>:<account>:group/<name>)", r.ResourceGroupARN)
	}
	for i, b := range r.CapacityBlocks {
		p := fmt.Sprintf("%s.capacity_blocks[%d]", path, i)
		switch {
		case !capacityReservationRe.MatchString(b.ID):
			v.add(p+".id", "%q is not a capacity reservation id (cr- and 8 or 17 hex digits: the Capacity Block's reservation id, as `aws ec2 describe-capacity-reservations` lists it)", b.ID)
		case seen[b.ID]:
			v.add(p+".id", "%s is listed twice (a Capacity Block is listed under capacity_blocks only)", b.ID)
		}
		seen[b.ID] = true
		if b.PriceUSD <= 0 || math.IsNaN(b.PriceUSD) || math.IsInf(b.PriceUSD, 0) {
			v.add(p+".price_usd", "want the block's upfront price in USD (> 0, as its purchase showed it): EC2 does not describe it and the ledger bills it")
		}
	}
	if r.Only && !r.Any() {
		v.add(path+".only", "only: true needs ids or resource_group_arn: the class would have no capacity at all")
	}
}
