package ec2emu

import (
	"time"
)

// BillLine is one running segment of one instance in the emulator's own
// billing record, priced the way EC2 bills Linux instance usage:
//
//   - An instance is billed only while running: from the moment it enters
//     running until it enters stopping or shutting-down. pending, stopping,
//     stopped, shutting-down and terminated are not billed (EC2 User Guide,
//     "Instance state changes": the billing column). Each stop/start makes a
//     new segment.
//   - Per second, with a minimum of 60 seconds per segment (each start is
//     charged at least one minute).
//   - At the instance's price when the segment began: the spot price of its
//     pool (Options.SpotPrice or the catalog's estimate) or the catalog's
//     on-demand price.
//   - A spot instance that EC2 interrupts (Interrupt) within the first hour
//     of a segment is not charged for it (Waived; "Billing for interrupted
//     Spot Instances", Linux); after the first hour the seconds used are.
//
// EBS volumes, data transfer and public IPv4 addresses are not modelled, so a
// stopped instance costs nothing here (on AWS its volumes are still billed).
type BillLine struct {
	InstanceID   string
	InstanceType string
	Zone         string
	Lifecycle    string    // "spot" or "on-demand"
	LaunchTime   time.Time // the launch or start that led to this segment (pending)
	Start        time.Time // entered running, whole seconds
	End          time.Time // entered stopping or shutting-down, whole seconds; zero while open
	Open         bool      // still running; Seconds and USD count up to now
	Seconds      int64     // billed seconds: max(60, End-Start)
	USDPerHour   float64
	USD          float64 // Seconds x USDPerHour / 3600, 0 when Waived
	EndReason    string  // StateReason code that ended it, e.g. "Client.UserInitiatedShutdown"
	Waived       bool    // spot interrupted by EC2 in its first hour: not charged
	// Reservation is the capacity reservation the instance ran in: its
	// seconds are paid by the reservation (ReservationBill), USD 0 here.
	Reservation string
}

// MinBilledSeconds is EC2's minimum charge per running segment.
const MinBilledSeconds = 60

func (b *BillLine) price(end time.Time) {
	secs := int64(end.Sub(b.Start) / time.Second)
	b.Seconds = max(secs, MinBilledSeconds)
	b.USD = float64(b.Seconds) * b.USDPerHour / 3600
	if b.Waived {
		b.USD = 0
	}
}

// openSegment starts billing an instance that just entered running; s.mu held.
func (s *Server) openSegment(in *instance) {
	b := &BillLine{InstanceID: in.ID, InstanceType: in.InstanceType, Zone: in.Zone, Lifecycle: in.Lifecycle,
		LaunchTime: in.LaunchTime, Start: in.changedAt, Open: true,
		USDPerHour: s.price(in.InstanceType, in.Zone, in.Lifecycle), Reservation: in.CapacityReservation}
	if b.Reservation != "" {
		b.USDPerHour = 0 // the reservation pays (ReservationBill)
	}
	in.seg = b
	s.bill = append(s.bill, b)
}

// closeSegment ends the instance's running segment at the transition that
// left running; its StateReason says why.
func (s *Server) closeSegment(in *instance) {
	b := in.seg
	if b == nil {
		return
	}
	in.seg = nil
	b.End = in.changedAt
	b.Open = false
	b.EndReason = in.StateReasonCode
	b.price(b.End)
}

// Bill returns the billing record, one line per running segment, in the
// order the segments began. Open lines are priced up to now.
func (s *Server) Bill() []BillLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Now().Truncate(time.Second)
	out := make([]BillLine, 0, len(s.bill))
	for _, b := range s.bill {
		c := *b
		if c.Open {
			c.price(now)
		}
		out = append(out, c)
	}
	return out
}

// BillFor returns the lines of one instance.
func (s *Server) BillFor(id string) []BillLine {
	var out []BillLine
	for _, b := range s.Bill() {
		if b.InstanceID == id {
			out = append(out, b)
		}
	}
	return out
}

// BillTotal is the sum of every line's USD (open ones up to now).
func (s *Server) BillTotal() float64 {
	t := 0.0
	for _, b := range s.Bill() {
		t += b.USD
	}
	return t
}
