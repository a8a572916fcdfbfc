package ec2emu

import (
	"fmt"
	"net/http"
	"time"
)

// Capacity Blocks for ML, as EC2 models them (EC2 User Guide, "Capacity
// Blocks for ML", "View Capacity Blocks", "Monitor Capacity Blocks using
// EventBridge"; botocore's CapacityReservation shape, ReservationType
// capacity-block):
//
//   - A block is a capacity reservation (cr-...) of Count instances of one
//     type in one zone for a prepaid window [Start, End). DescribeCapacity-
//     Reservations shows it with ReservationType capacity-block and state
//     scheduled before Start (AvailableInstanceCount 0), active inside the
//     window and expired from End on.
//   - Instances run in it only by targeting it (CapacityReservationTarget)
//     with InstanceMarketOptions.MarketType capacity-block; a launch without
//     the market type, or with it but no block, is refused
//     (InvalidParameterCombination); a launch while it is not active, or in
//     its last BlockReclaimLead, finds no room (ReservationCapacityExceeded).
//   - EC2 begins terminating the block's instances BlockReclaimLead (30
//     minutes) before End ("Forty minutes before your Capacity Block
//     reservation ends ... any instances running in the reservation will
//     begin to terminate in 10 minutes"); the emulator terminates them all
//     at that moment, with StateReason Server.ScheduledStop (the emulator's
//     choice: AWS documents no code for it).
//   - Billing: the block's whole price is paid once, up front
//     (ReservationBillLine.Prepaid, USD = UpfrontUSD); its instances cost
//     nothing more.

// BlockReclaimLead is how long before a Capacity Block's end EC2 begins
// terminating its instances.
const BlockReclaimLead = 30 * time.Minute

// CapacityBlockSpec describes a Capacity Block to create (control API).
type CapacityBlockSpec struct {
	InstanceType string
	Zone         string
	Count        int
	Start, End   time.Time
	// UpfrontUSD is the block's price; 0: the catalog's on-demand rate x
	// Count x the window's hours (the emulator's stand-in for the
	// offering's UpfrontFee).
	UpfrontUSD float64
}

// AddCapacityBlock creates a Capacity Block and returns its reservation id.
// Its instances are reclaimed BlockReclaimLead before End.
func (s *Server) AddCapacityBlock(spec CapacityBlockSpec) (string, error) {
	switch {
	case spec.Count < 1:
		return "", fmt.Errorf("a capacity block needs Count >= 1, got %d", spec.Count)
	case !spec.End.After(spec.Start):
		return "", fmt.Errorf("a capacity block's End (%s) must be after its Start (%s)", spec.End, spec.Start)
	}
	if _, ok := s.opts.Catalog.Lookup(spec.InstanceType); !ok {
		return "", fmt.Errorf("unknown instance type %q", spec.InstanceType)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.UpfrontUSD == 0 {
		spec.UpfrontUSD = float64(spec.Count) * s.price(spec.InstanceType, spec.Zone, "on-demand") * spec.End.Sub(spec.Start).Hours()
	}
	cr := &capReservation{
		CapacityReservationSpec: CapacityReservationSpec{InstanceType: spec.InstanceType, Zone: spec.Zone, Count: spec.Count, Match: "targeted", End: spec.End.Truncate(time.Second)},
		id:                      s.newID("cr-"), start: spec.Start.Truncate(time.Second), block: true, upfront: spec.UpfrontUSD, created: s.Now().Truncate(time.Second),
	}
	s.crs = append(s.crs, cr)
	s.after(cr.End.Add(-BlockReclaimLead).Sub(s.Now()), func() { s.reclaimBlock(cr) })
	return cr.id, nil
}

// reclaimBlock terminates the block's instances (its end is near).
func (s *Server) reclaimBlock(cr *capReservation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, in := range s.order {
		if in.CapacityReservation == cr.id && (in.State == "pending" || in.State == "running" || in.State == "stopping" || in.State == "stopped") {
			s.log.Info("capacity block ending: terminating its instance", "reservation", cr.id, "instance", in.ID)
			s.terminate(in, byBlockEnd)
		}
	}
}

// blockState is a Capacity Block's state now; s.mu held.
func (s *Server) blockState(cr *capReservation) string {
	now := s.Now()
	switch {
	case now.Before(cr.start):
		return "scheduled"
	case !now.Before(cr.End):
		return "expired"
	}
	return "active"
}

// blockLaunchable reports whether a launch may run in the block now: active
// and not yet reclaiming; s.mu held.
func (s *Server) blockLaunchable(cr *capReservation) bool {
	return s.blockState(cr) == "active" && s.Now().Before(cr.End.Add(-BlockReclaimLead))
}

// checkBlockMarket refuses a launch whose market type and target disagree:
// a Capacity Block takes only MarketType capacity-block, and that market
// type only a Capacity Block; s.mu held.
func checkBlockMarket(market string, crs []*capReservation, targeted bool) *apiError {
	block := false
	for _, cr := range crs {
		block = block || cr.block
	}
	switch {
	case block && market != "capacity-block":
		return errf(400, "InvalidParameterCombination", "launching into a Capacity Block needs InstanceMarketOptions.MarketType capacity-block")
	case market == "capacity-block" && (!targeted || !block):
		return errf(400, "InvalidParameterCombination", "MarketType capacity-block needs a CapacityReservationTarget that is a Capacity Block")
	}
	return nil
}

// controlCapacityBlock creates a block from POST /_emu/capacity-block.
func (s *Server) controlCapacityBlock(r *http.Request) (string, error) {
	var b struct {
		InstanceType, Zone string
		Count              int
		StartIn, EndIn     string
		UpfrontUSD         float64
	}
	if err := decodeStrict(r, &b); err != nil {
		return "", err
	}
	startIn, err := parseDurationOr0(b.StartIn)
	if err != nil {
		return "", fmt.Errorf("StartIn: %w", err)
	}
	endIn, err := time.ParseDuration(b.EndIn)
	if err != nil {
		return "", fmt.Errorf("EndIn: %w", err)
	}
	now := s.Now()
	return s.AddCapacityBlock(CapacityBlockSpec{InstanceType: b.InstanceType, Zone: b.Zone, Count: b.Count, Start: now.Add(startIn), End: now.Add(endIn), UpfrontUSD: b.UpfrontUSD})
}
