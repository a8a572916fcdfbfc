package ec2emu

import (
	"encoding/xml"
	"slices"
	"time"
)

// On-Demand Capacity Reservations (ODCRs), as EC2 models them (EC2 User
// Guide, "On-Demand Capacity Reservations"; botocore's CapacityReservation
// shape):
//
//   - A reservation holds Count instances of one type in one zone, active
//     from its start until its end (or forever). Its instances do not draw
//     on the zone's general pool: the capacity is set aside.
//   - Match "open": any on-demand launch of that type and zone whose
//     CapacityReservationPreference is open (EC2's default) runs in it
//     while it has room, by RunInstances or a fleet. Match "targeted": only
//     launches that name it (CapacityReservationTarget.CapacityReservationId,
//     or its resource group's ARN) run in it.
//   - A launch that targets a reservation without room for MinCount fails
//     with ReservationCapacityExceeded; nothing falls back on its own.
//   - Billing: the reservation is billed at the on-demand rate for every
//     reserved instance, used or not, per second from its start to its end;
//     an instance running in it is not billed again (BillLine.USDPerHour 0,
//     Reservation set).

// CapacityReservationSpec describes a reservation to create (control API).
type CapacityReservationSpec struct {
	InstanceType string
	Zone         string
	Count        int
	Match        string // "open" (the default) or "targeted"
	// ResourceGroupARN puts the reservation in a resource group that
	// launches can target as a whole; "" for none.
	ResourceGroupARN string
	// End is when the reservation expires; zero: it never ends.
	End time.Time
}

// CapacityReservation is a reservation as EC2 describes it now.
type CapacityReservation struct {
	CapacityReservationSpec
	ID        string
	Start     time.Time
	State     string // active, expired or cancelled
	Available int
}

type capReservation struct {
	CapacityReservationSpec
	id        string
	start     time.Time
	cancelled time.Time // zero while not cancelled
	// a Capacity Block (capblocks.go): start..End is its window, upfront
	// its prepaid price, created when it was bought
	block   bool
	upfront float64
	created time.Time
}

// AddCapacityReservation creates an active reservation and returns its id.
func (s *Server) AddCapacityReservation(spec CapacityReservationSpec) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.Match == "" {
		spec.Match = "open"
	}
	cr := &capReservation{CapacityReservationSpec: spec, id: s.newID("cr-"), start: s.Now().Truncate(time.Second)}
	s.crs = append(s.crs, cr)
	return cr.id
}

// CancelCapacityReservation ends a reservation now (its billing stops; its
// instances keep running as plain on-demand ones, as on EC2).
func (s *Server) CancelCapacityReservation(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cr := s.crByID(id); cr != nil && cr.cancelled.IsZero() {
		cr.cancelled = s.Now().Truncate(time.Second)
	}
}

// CapacityReservations lists every reservation as EC2 describes it now.
func (s *Server) CapacityReservations() []CapacityReservation {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]CapacityReservation, 0, len(s.crs))
	for _, cr := range s.crs {
		out = append(out, s.describeCR(cr))
	}
	return out
}

func (s *Server) crByID(id string) *capReservation {
	for _, cr := range s.crs {
		if cr.id == id {
			return cr
		}
	}
	return nil
}

// crState is the reservation's state now; s.mu held.
func (s *Server) crState(cr *capReservation) string {
	if cr.block {
		return s.blockState(cr)
	}
	now := s.Now()
	switch {
	case !cr.cancelled.IsZero():
		return "cancelled"
	case !cr.End.IsZero() && !now.Before(cr.End):
		return "expired"
	}
	return "active"
}

// crUsed counts the instances that occupy the reservation; s.mu held.
func (s *Server) crUsed(cr *capReservation) int {
	n := 0
	for _, in := range s.order {
		if in.CapacityReservation == cr.id && (in.State == "pending" || in.State == "running" || in.State == "stopping" || in.State == "shutting-down") {
			n++
		}
	}
	return n
}

func (s *Server) describeCR(cr *capReservation) CapacityReservation {
	d := CapacityReservation{CapacityReservationSpec: cr.CapacityReservationSpec, ID: cr.id, Start: cr.start, State: s.crState(cr)}
	if d.State == "active" {
		d.Available = max(cr.Count-s.crUsed(cr), 0)
	}
	return d
}

// crFree is how many more instances fit in the reservation; s.mu held.
func (s *Server) crFree(cr *capReservation) int {
	if s.crState(cr) != "active" || (cr.block && !s.blockLaunchable(cr)) {
		return 0
	}
	return max(cr.Count-s.crUsed(cr), 0)
}

// crTargets resolves a launch's CapacityReservationSpecification into the
// reservations it may run in, in order, for typ in zone: the named one, or
// the resource group's matching ones. targeted says the launch named a
// target (it must then run in one of them or fail); open says it may use
// an open reservation that matches (EC2's default preference).
func (s *Server) crTargets(spec query, typ, zone string) (crs []*capReservation, targeted, open bool, aerr *apiError) {
	pref := spec.get("CapacityReservationPreference")
	id := spec.get("CapacityReservationTarget.CapacityReservationId")
	group := spec.get("CapacityReservationTarget.CapacityReservationResourceGroupArn")
	switch pref {
	case "", "open", "none", "capacity-reservations-only":
	default:
		return nil, false, false, invalid("CapacityReservationPreference must be open, none or capacity-reservations-only, got %q", pref)
	}
	if (id != "" || group != "") && pref != "" && pref != "capacity-reservations-only" {
		return nil, false, false, errf(400, "InvalidParameterCombination", "CapacityReservationPreference %s cannot be combined with a CapacityReservationTarget", pref)
	}
	switch {
	case id != "" && group != "":
		return nil, false, false, errf(400, "InvalidParameterCombination", "name either a CapacityReservationId or a CapacityReservationResourceGroupArn, not both")
	case id != "":
		cr := s.crByID(id)
		if cr == nil {
			return nil, false, false, errf(400, "InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
		}
		if cr.InstanceType != typ || cr.Zone != zone {
			return nil, false, false, errf(400, "InvalidParameterCombination",
				"The instance type and Availability Zone (%s, %s) do not match those of capacity reservation %s (%s, %s)", typ, zone, id, cr.InstanceType, cr.Zone)
		}
		return []*capReservation{cr}, true, false, nil
	case group != "":
		for _, cr := range s.crs {
			if cr.ResourceGroupARN == group && cr.InstanceType == typ && cr.Zone == zone {
				crs = append(crs, cr)
			}
		}
		return crs, true, false, nil
	case pref == "capacity-reservations-only":
		return nil, false, false, invalid("CapacityReservationPreference capacity-reservations-only needs a CapacityReservationTarget")
	}
	return nil, false, pref != "none", nil
}

// crPlace picks the reservation each of n instances runs in (in order of
// crs, the fullest first), or nil when they do not fit; s.mu held.
func (s *Server) crPlace(crs []*capReservation, n int) []*capReservation {
	var out []*capReservation
	for _, cr := range crs {
		for range s.crFree(cr) {
			if len(out) == n {
				return out
			}
			out = append(out, cr)
		}
	}
	if len(out) < n {
		return nil
	}
	return out
}

// openReservation is an open, active reservation with room for one
// on-demand instance of typ in zone, or nil; s.mu held.
func (s *Server) openReservation(typ, zone string) *capReservation {
	for _, cr := range s.crs {
		if cr.Match == "open" && cr.InstanceType == typ && cr.Zone == zone && s.crFree(cr) > 0 {
			return cr
		}
	}
	return nil
}

// ReservationBillLine is one reservation's charge: on-demand rate x
// reserved count, per second from its start to its end (or now), used or
// not.
type ReservationBillLine struct {
	ReservationID string
	InstanceType  string
	Zone          string
	Count         int
	Start, End    time.Time
	Open          bool // still active: priced up to now
	Seconds       int64
	USDPerHour    float64 // for the whole reservation
	USD           float64
	// Prepaid: a Capacity Block, its whole price (USD) charged once when
	// bought; Start..End is its window, USDPerHour its average rate.
	Prepaid bool
}

// ReservationBill returns every reservation's charge so far.
func (s *Server) ReservationBill() []ReservationBillLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Now().Truncate(time.Second)
	var out []ReservationBillLine
	for _, cr := range s.crs {
		if cr.block {
			secs := int64(cr.End.Sub(cr.start) / time.Second)
			out = append(out, ReservationBillLine{ReservationID: cr.id, InstanceType: cr.InstanceType, Zone: cr.Zone, Count: cr.Count, Start: cr.start, End: cr.End,
				Seconds: secs, USDPerHour: cr.upfront * 3600 / float64(secs), USD: cr.upfront, Prepaid: true})
			continue
		}
		end, open := now, true
		if !cr.cancelled.IsZero() {
			end, open = cr.cancelled, false
		} else if !cr.End.IsZero() && !now.Before(cr.End) {
			end, open = cr.End, false
		}
		b := ReservationBillLine{ReservationID: cr.id, InstanceType: cr.InstanceType, Zone: cr.Zone, Count: cr.Count, Start: cr.start, End: end, Open: open,
			USDPerHour: float64(cr.Count) * s.price(cr.InstanceType, cr.Zone, "on-demand")}
		b.Seconds = max(int64(end.Sub(cr.start)/time.Second), 0)
		b.USD = float64(b.Seconds) * b.USDPerHour / 3600
		out = append(out, b)
	}
	return out
}

// ---- DescribeCapacityReservations ----

type xCapacityReservation struct {
	CapacityReservationID  string        `xml:"capacityReservationId"`
	OwnerID                string        `xml:"ownerId"`
	InstanceType           string        `xml:"instanceType"`
	InstancePlatform       string        `xml:"instancePlatform"`
	AvailabilityZone       string        `xml:"availabilityZone"`
	Tenancy                string        `xml:"tenancy"`
	TotalInstanceCount     int           `xml:"totalInstanceCount"`
	AvailableInstanceCount int           `xml:"availableInstanceCount"`
	State                  string        `xml:"state"`
	StartDate              string        `xml:"startDate"`
	EndDate                string        `xml:"endDate,omitempty"`
	EndDateType            string        `xml:"endDateType"`
	InstanceMatchCriteria  string        `xml:"instanceMatchCriteria"`
	CreateDate             string        `xml:"createDate"`
	ReservationType        string        `xml:"reservationType"`
	TagSet                 *xItems[xTag] `xml:"tagSet,omitempty"`
}

func (s *Server) describeCapacityReservations(q query, _ string) (any, *apiError) {
	ids := q.strings("CapacityReservationId")
	fs := q.filters()
	var out []xCapacityReservation
	for _, id := range ids {
		if s.crByID(id) == nil {
			return nil, errf(400, "InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
		}
	}
	for _, cr := range s.crs {
		if len(ids) > 0 && !slices.Contains(ids, cr.id) {
			continue
		}
		d := s.describeCR(cr)
		rtype := "default"
		if cr.block {
			rtype = "capacity-block"
		}
		fields := map[string]string{"instance-type": d.InstanceType, "availability-zone": d.Zone, "state": d.State, "instance-match-criteria": d.Match}
		ok := true
		for _, f := range fs {
			v, known := fields[f.name]
			if !known {
				return nil, invalid("The filter '%s' is invalid", f.name)
			}
			ok = ok && f.match(v)
		}
		if !ok {
			continue
		}
		x := xCapacityReservation{CapacityReservationID: d.ID, OwnerID: s.opts.Account, InstanceType: d.InstanceType, InstancePlatform: "Linux/UNIX",
			AvailabilityZone: d.Zone, Tenancy: "default", TotalInstanceCount: d.Count, AvailableInstanceCount: d.Available, State: d.State,
			StartDate: d.Start.UTC().Format("2006-01-02T15:04:05.000Z"), EndDateType: "unlimited", InstanceMatchCriteria: d.Match,
			CreateDate: d.Start.UTC().Format("2006-01-02T15:04:05.000Z"), ReservationType: rtype}
		if cr.block {
			x.CreateDate = cr.created.UTC().Format("2006-01-02T15:04:05.000Z")
		}
		if !d.End.IsZero() {
			x.EndDate, x.EndDateType = d.End.UTC().Format("2006-01-02T15:04:05.000Z"), "limited"
		}
		if d.ResourceGroupARN != "" {
			x.TagSet = &xItems[xTag]{Items: []xTag{{"burst:emulator:resource-group", d.ResourceGroupARN}}}
		}
		out = append(out, x)
	}
	return struct {
		XMLName      xml.Name                     `xml:"x"`
		Reservations xItems[xCapacityReservation] `xml:"capacityReservationSet"`
	}{Reservations: xItems[xCapacityReservation]{Items: out}}, nil
}
