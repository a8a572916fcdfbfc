package sizing

import (
	"errors"
	"fmt"
	"sort"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/cloud"
)

// offerings lists a class's offerings for a job in the given zones, best
// first, and why spot was excluded (if it was).
func (p *Policy) offerings(c Class, r Request, nodes int, zones []string, unavail []Unavailable, hours float64) ([]cloud.Offering, string) {
	caps, why := capacities(c, r)
	md := r.Metadata
	ckpt := 1.0
	switch {
	case md.Checkpoint > 0:
		ckpt = md.Checkpoint.Hours()
	case hours > 0:
		ckpt = hours
	}
	var out []cloud.Offering
	order := map[string]int{}
	for i, tn := range c.InstanceTypes {
		order[tn] = i
		t, ok := p.cat.Lookup(tn)
		if !ok || !t.HasPrice() {
			continue
		}
		if r.CPUsPerNode > t.VCPU || r.MemoryMiBPerNode > t.MemoryMiB {
			continue
		}
		for _, z := range zones {
			for _, cp := range caps {
				if isUnavailable(unavail, tn, z, cp) {
					continue
				}
				o := cloud.Offering{InstanceType: tn, Zone: z, Capacity: cp}
				if cp == capacity.Spot {
					s, ok := p.spotOf(t)
					if !ok {
						continue
					}
					o.PriceUSD = t.OnDemandUSD * (1 - s.SavingsPct/100)
					f := SpotRiskFactor(s.Bucket.HourlyRate(), nodes, ckpt, p.params.RelaunchOverhead.Hours())
					o.ExpectedUSD = o.PriceUSD * f
					o.Reason = fmt.Sprintf("spot %.0f%% below on-demand, interruptions %s a month: expected rework +%.2f%%", s.SavingsPct, s.Bucket, (f-1)*100)
				} else {
					o.PriceUSD = t.OnDemandUSD
					o.ExpectedUSD = t.OnDemandUSD
					o.Reason = "on-demand"
					if why != "" {
						o.Reason += ": " + why
					}
				}
				out = append(out, o)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.ExpectedUSD != b.ExpectedUSD {
			return a.ExpectedUSD < b.ExpectedUSD
		}
		if a.Capacity != b.Capacity {
			return a.Capacity == capacity.Spot
		}
		return order[a.InstanceType] < order[b.InstanceType]
	})
	return out, why
}

func isUnavailable(us []Unavailable, typ, zone string, c capacity.Type) bool {
	for _, u := range us {
		if u.matches(typ, zone, c) {
			return true
		}
	}
	return false
}

// RankInput asks for the offerings of one class for one job at resume.
type RankInput struct {
	Class       string
	Request     Request
	Zones       []string // zones (or subnets' zones) to consider; empty means "any zone" ("")
	Unavailable []Unavailable
	Budget      Budget
	EstHours    float64 // the job's estimated run time, used when it does not checkpoint; 0 unknown
}

// ErrNoOffering is returned when every offering of a class is unavailable or
// unfit.
var ErrNoOffering = errors.New("no offering available")

// Rank returns the class's offerings for the job, best (lowest expected
// price per useful hour) first; spot before on-demand at equal price,
// otherwise the admin's type order. It returns an *OverBudgetError when the
// account is over budget (burst-resume must then launch nothing), an error
// wrapping ErrUnknownClass for an unknown class, and one wrapping
// ErrNoOffering when nothing is left.
func (p *Policy) Rank(in RankInput) ([]cloud.Offering, error) {
	if in.Budget.Over() {
		return nil, &OverBudgetError{Budget: in.Budget}
	}
	c, ok := p.Class(in.Class)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownClass, in.Class)
	}
	zones := in.Zones
	if len(zones) == 0 {
		zones = []string{""}
	}
	offers, why := p.offerings(c, in.Request, in.Request.nodes(), zones, in.Unavailable, in.EstHours)
	if len(offers) == 0 {
		msg := fmt.Sprintf("%v for class %s in zones %v", ErrNoOffering, c.Name, zones)
		if why != "" {
			msg += " (" + why + ")"
		}
		return nil, fmt.Errorf("%s: %w", msg, ErrNoOffering)
	}
	return offers, nil
}

// HourlyPrice returns a type's price per hour for a capacity in the policy's
// region (spot: on-demand x (1 - Spot Advisor savings)); ok is false when the
// catalog has no such price. The budget ledger uses it for spend.
func (p *Policy) HourlyPrice(instanceType string, c capacity.Type) (float64, bool) {
	t, ok := p.cat.Lookup(instanceType)
	if !ok || !t.HasPrice() {
		return 0, false
	}
	if c == capacity.Spot {
		s, ok := p.spotOf(t)
		if !ok {
			return 0, false
		}
		return t.OnDemandUSD * (1 - s.SavingsPct/100), true
	}
	return t.OnDemandUSD, true
}

// Catalog returns the policy's catalog.
func (p *Policy) Catalog() *catalog.Catalog { return p.cat }
