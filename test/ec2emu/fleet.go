package ec2emu

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ---- CreateFleet ----

// LaunchIndexMode says how CreateFleet numbers ami-launch-index. EC2 does
// not promise 0..n-1 across one fleet: a fleet is launched as one launch per
// pool, each numbering its instances from 0.
type LaunchIndexMode string

const (
	LaunchIndexSequential LaunchIndexMode = "sequential" // 0..n-1 across the fleet (the default; "" too)
	LaunchIndexPerPool    LaunchIndexMode = "per-pool"   // each pool (override) of a fleet from 0: indexes collide across pools
	LaunchIndexCollide    LaunchIndexMode = "collide"    // every instance 0
	LaunchIndexSparse     LaunchIndexMode = "sparse"     // 0, 2, 4, ...: unique but not contiguous
)

var launchIndexModes = []string{string(LaunchIndexSequential), string(LaunchIndexPerPool), string(LaunchIndexCollide), string(LaunchIndexSparse)}

func (m LaunchIndexMode) valid() bool {
	return m == "" || m == LaunchIndexSequential || m == LaunchIndexPerPool || m == LaunchIndexCollide || m == LaunchIndexSparse
}

// index is the launch index of the fleet's i-th instance, the inPool-th of its pool.
func (m LaunchIndexMode) index(i, inPool int) int {
	switch m {
	case LaunchIndexPerPool:
		return inPool
	case LaunchIndexCollide:
		return 0
	case LaunchIndexSparse:
		return 2 * i
	}
	return i
}

type xFleetLTSpec struct {
	LaunchTemplateID   string `xml:"launchTemplateId"`
	LaunchTemplateName string `xml:"launchTemplateName"`
	Version            string `xml:"version"`
}

type xFleetOverrides struct {
	InstanceType     string   `xml:"instanceType"`
	SubnetID         string   `xml:"subnetId,omitempty"`
	AvailabilityZone string   `xml:"availabilityZone,omitempty"`
	MaxPrice         string   `xml:"maxPrice,omitempty"`
	Priority         *float64 `xml:"priority,omitempty"`
}

type xLTAndOverrides struct {
	LaunchTemplateSpecification xFleetLTSpec    `xml:"launchTemplateSpecification"`
	Overrides                   xFleetOverrides `xml:"overrides"`
}

type xFleetError struct {
	LaunchTemplateAndOverrides xLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string          `xml:"lifecycle"`
	ErrorCode                  string          `xml:"errorCode"`
	ErrorMessage               string          `xml:"errorMessage"`
}

type xFleetInstance struct {
	LaunchTemplateAndOverrides xLTAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string          `xml:"lifecycle"`
	InstanceIDs                xItems[string]  `xml:"instanceIds"`
	InstanceType               string          `xml:"instanceType"`
	// no subnetId or availabilityZone: a fleet instance's zone and subnet are
	// in launchTemplateAndOverrides.overrides only (EC2 API Reference,
	// CreateFleetInstance data type; botocore's CreateFleetInstance shape)
}

type override struct {
	lt        *launchTemplate
	ltVersion string
	userData  []byte // from LaunchTemplateSpecificationUserData, nil for the template's
	typ       string
	subnet    string
	zone      string
	priority  *float64
	maxPrice  string
	group     string
	pos       int
	avail     int // free slots, -1 unlimited
}

func (o *override) xml() xLTAndOverrides {
	return xLTAndOverrides{
		LaunchTemplateSpecification: xFleetLTSpec{o.lt.ID, o.lt.Name, o.ltVersion},
		Overrides:                   xFleetOverrides{InstanceType: o.typ, SubnetID: o.subnet, AvailabilityZone: o.zone, MaxPrice: o.maxPrice, Priority: o.priority},
	}
}

func (s *Server) createFleet(q query, token string) (any, *apiError) {
	if t := q.get("Type"); t != "instant" {
		return nil, invalid("this emulator implements only fleets of type instant, got %q", t)
	}
	tcs := q.sub("TargetCapacitySpecification")
	total, err := tcs.int("TotalTargetCapacity", 0)
	if err != nil || total < 1 {
		return nil, invalid("TargetCapacitySpecification.TotalTargetCapacity must be a positive integer")
	}
	capType := tcs.get("DefaultTargetCapacityType")
	var opts query
	switch capType {
	case "spot":
		opts = q.sub("SpotOptions")
	case "on-demand":
		opts = q.sub("OnDemandOptions")
	default:
		return nil, invalid("TargetCapacitySpecification.DefaultTargetCapacityType must be spot or on-demand, got %q", capType)
	}
	minCap, err := opts.int("MinTargetCapacity", 0)
	if err != nil || minCap < 0 || minCap > total {
		return nil, invalid("MinTargetCapacity must be between 0 and TotalTargetCapacity")
	}
	singleAZ := opts.get("SingleAvailabilityZone") == "true"
	singleType := opts.get("SingleInstanceType") == "true"
	if minCap > 0 && !singleAZ && !singleType {
		return nil, invalid("MinTargetCapacity requires SingleAvailabilityZone or SingleInstanceType")
	}
	strategy := opts.get("AllocationStrategy")
	if aerr := checkStrategy(capType, strategy); aerr != nil {
		return nil, aerr
	}
	lifecycle := capType
	var ovs []*override
	for _, c := range q.list("LaunchTemplateConfigs") {
		spec := c.sub("LaunchTemplateSpecification")
		lt, aerr := s.resolveTemplate(spec)
		if aerr != nil {
			return nil, aerr
		}
		var ud []byte
		if u := spec.get("LaunchTemplateSpecificationUserData"); u != "" {
			if ud, err = base64.StdEncoding.DecodeString(u); err != nil {
				return nil, invalid("Invalid BASE64 encoding of user data.")
			}
		}
		ver := spec.get("Version")
		if ver == "" {
			ver = "$Default"
		}
		list := c.list("Overrides")
		if len(list) == 0 {
			list = []query{c.sub("Overrides.none")} // the template's own type and subnet
		}
		for _, o := range list {
			ov := &override{lt: lt, ltVersion: ver, userData: ud, typ: o.get("InstanceType"), subnet: o.get("SubnetId"),
				zone: o.get("AvailabilityZone"), maxPrice: o.get("MaxPrice"), group: o.get("Placement.GroupName"), pos: len(ovs)}
			if ov.typ == "" {
				ov.typ = lt.InstanceType
			}
			if ov.typ == "" {
				return nil, errf(400, "MissingParameter", "no instance type in the overrides or the launch template")
			}
			if _, ok := s.opts.Catalog.Lookup(ov.typ); !ok {
				return nil, invalid("The instance type '%s' does not exist", ov.typ)
			}
			if p := o.get("Priority"); p != "" {
				f, err := strconv.ParseFloat(p, 64)
				if err != nil {
					return nil, invalid("bad override priority %q", p)
				}
				ov.priority = &f
			}
			if ov.subnet != "" {
				z, ok := s.zoneOf(ov.subnet)
				if !ok {
					return nil, errf(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", ov.subnet)
				}
				if ov.zone != "" && ov.zone != z {
					return nil, invalid("subnet %s is in %s, not %s", ov.subnet, z, ov.zone)
				}
				ov.zone = z
			} else {
				if ov.subnet = s.firstSubnet(ov.zone); ov.subnet == "" {
					return nil, invalid("no subnet in availability zone %q", ov.zone)
				}
				ov.zone, _ = s.zoneOf(ov.subnet)
			}
			ovs = append(ovs, ov)
		}
	}
	if len(ovs) == 0 {
		return nil, errf(400, "MissingParameter", "LaunchTemplateConfigs is required")
	}
	if len(ovs) > 300 {
		return nil, invalid("at most 300 launch template overrides per fleet")
	}
	tags := q.tagSpecs("TagSpecification")
	for rt := range tags {
		if rt != "instance" && rt != "fleet" && rt != "volume" && rt != "network-interface" {
			return nil, invalid("'%s' is not a valid taggable resource type for this operation.", rt)
		}
	}

	var fleetErrs []xFleetError
	quota := 0
	limit := s.opts.SpotInstanceLimit
	quotaCode := "MaxSpotInstanceCountExceeded"
	if capType == "on-demand" {
		limit, quotaCode = s.opts.OnDemandInstanceLimit, "InstanceLimitExceeded"
	}
	if limit > 0 {
		quota = limit - s.liveCount(lifecycle)
	}
	usable := ovs[:0:0]
	for _, ov := range ovs {
		ov.avail = s.poolFree(ov.typ, ov.zone, lifecycle)
		switch {
		case capType == "spot" && ov.maxPrice != "" && mustFloat(ov.maxPrice) < s.spotPrice(ov.typ, ov.zone):
			fleetErrs = append(fleetErrs, xFleetError{ov.xml(), lifecycle, "SpotMaxPriceTooLow",
				fmt.Sprintf("Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %.4f.", ov.maxPrice, s.spotPrice(ov.typ, ov.zone))})
		case s.launchRuleError(ov) != nil:
			e := s.launchRuleError(ov)
			fleetErrs = append(fleetErrs, xFleetError{ov.xml(), lifecycle, e.Code, e.Message})
		case limit > 0 && quota <= 0:
			fleetErrs = append(fleetErrs, xFleetError{ov.xml(), lifecycle, quotaCode,
				fmt.Sprintf("You have reached the limit of %d %s instances for this account.", limit, capType)})
		default:
			usable = append(usable, ov)
		}
	}
	// Choose where to launch.
	need := total
	if limit > 0 && quota < need {
		need = max(quota, 0)
	}
	if capType == "spot" && strategy == "price-capacity-optimized" {
		s.orderPriceCapacity(usable, need)
	} else {
		order(usable, strategy)
	}
	type take struct {
		ov *override
		n  int
	}
	var plan []take
	ice := func(ov *override) {
		fleetErrs = append(fleetErrs, xFleetError{ov.xml(), lifecycle, "InsufficientInstanceCapacity",
			fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.", ov.typ, ov.zone)})
	}
	// greedy fills need from cands in order; pools it visits that are dry
	// (or too small when nothing else fills the rest) get an error.
	greedy := func(cands []*override) ([]take, int, []*override) {
		var p []take
		var short []*override
		left := need
		for _, ov := range cands {
			if left == 0 {
				break
			}
			n := left
			if ov.avail >= 0 && ov.avail < n {
				n = ov.avail
				short = append(short, ov)
			}
			if n > 0 {
				p = append(p, take{ov, n})
				left -= n
			}
		}
		if left == 0 { // only the dry ones failed
			dry := short[:0]
			for _, ov := range short {
				if ov.avail == 0 {
					dry = append(dry, ov)
				}
			}
			short = dry
		}
		return p, need - left, short
	}
	if singleAZ || singleType {
		var groups [][]*override
		idx := map[string]int{}
		for _, ov := range usable {
			k := ""
			if singleAZ {
				k += ov.zone
			}
			if singleType {
				k += "/" + ov.typ
			}
			i, ok := idx[k]
			if !ok {
				i = len(groups)
				idx[k] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], ov)
		}
		want := max(minCap, 1)
		for _, g := range groups {
			p, got, short := greedy(g)
			if got >= want {
				plan = p
				for _, ov := range short {
					if ov.avail == 0 {
						ice(ov)
					}
				}
				break
			}
			for _, ov := range short {
				ice(ov)
			}
		}
	} else {
		var short []*override
		plan, _, short = greedy(usable)
		for _, ov := range short {
			ice(ov)
		}
	}
	launched := 0
	for _, t := range plan {
		launched += t.n
	}
	if launched < minCap {
		plan, launched = nil, 0
	}
	if s.fs.shortFleets > 0 && launched > 1 {
		// ShortFleets: EC2 leaves some of the capacity out, all-or-nothing or not
		s.fs.shortFleets--
		s.fs.shortFleeted++
		cut := min(s.fs.shortBy, launched-1)
		for i := len(plan) - 1; i >= 0 && cut > 0; i-- {
			k := min(cut, plan[i].n)
			plan[i].n -= k
			cut -= k
			launched -= k
			ice(plan[i].ov)
		}
		kept := plan[:0]
		for _, t := range plan {
			if t.n > 0 {
				kept = append(kept, t)
			}
		}
		plan = kept
	}
	if launched > 0 && !s.takeTokens(launched) {
		return nil, errf(503, "RequestLimitExceeded", "Request limit exceeded.")
	}
	fleetID := "fleet-" + strings.TrimPrefix(s.newID("x-"), "x-")
	reservation := s.newID("r-")
	var fleetInstances []xFleetInstance
	idx := 0
	for _, t := range plan {
		fi := xFleetInstance{LaunchTemplateAndOverrides: t.ov.xml(), Lifecycle: lifecycle, InstanceType: t.ov.typ}
		for inPool := range t.n {
			in := &instance{Instance: Instance{InstanceType: t.ov.typ, ImageID: t.ov.lt.ImageID, Zone: t.ov.zone, SubnetID: t.ov.subnet, Lifecycle: lifecycle,
				LaunchIndex: s.opts.LaunchIndexes.index(idx, inPool), Tags: merge(t.ov.lt.TagSpecs["instance"], tags["instance"]), UserData: t.ov.lt.UserData,
				MetadataOptions: t.ov.lt.Meta.over(defaultMetadataOptions()), ShutdownBehavior: t.ov.lt.Shutdown,
				LaunchTemplate: t.ov.lt.ID, ClientToken: token, PlacementGroup: t.ov.group, NetworkInterfaces: nicsOn(t.ov.lt.NICs, t.ov.subnet)},
				reservation: reservation}
			in.Tags["aws:ec2:fleet-id"] = fleetID
			if t.ov.userData != nil {
				in.UserData = t.ov.userData
			}
			ip, err := s.allocIP(in.Instance)
			if err != nil {
				return nil, errf(500, "InternalError", "allocating a private IP: %v", err)
			}
			in.PrivateIP = ip
			if lifecycle == "on-demand" {
				// EC2 runs an on-demand instance in an open capacity
				// reservation that matches it (reservations.go)
				if cr := s.openReservation(t.ov.typ, t.ov.zone); cr != nil {
					in.CapacityReservation = cr.id
				}
			}
			s.consume(t.ov.typ, t.ov.zone, lifecycle)
			s.launch(in)
			fi.InstanceIDs.Items = append(fi.InstanceIDs.Items, in.ID)
			idx++
		}
		fleetInstances = append(fleetInstances, fi)
	}
	return struct {
		XMLName          xml.Name               `xml:"x"`
		FleetID          string                 `xml:"fleetId"`
		ErrorSet         xItems[xFleetError]    `xml:"errorSet"`
		FleetInstanceSet xItems[xFleetInstance] `xml:"fleetInstanceSet"`
	}{FleetID: fleetID, ErrorSet: xItems[xFleetError]{fleetErrs}, FleetInstanceSet: xItems[xFleetInstance]{fleetInstances}}, nil
}

func mustFloat(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return f
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// order sorts overrides by the allocation strategy: priority for the
// prioritized strategies, price for lowest-price, free capacity otherwise.
func order(ovs []*override, strategy string) {
	prio := func(o *override) float64 {
		if o.priority == nil {
			return 1e18
		}
		return *o.priority
	}
	free := func(o *override) int {
		if o.avail < 0 {
			return 1 << 30
		}
		return o.avail
	}
	sort.SliceStable(ovs, func(i, j int) bool {
		a, b := ovs[i], ovs[j]
		switch strategy {
		case "prioritized", "capacity-optimized-prioritized":
			if prio(a) != prio(b) {
				return prio(a) < prio(b)
			}
		case "lowest-price", "lowestPrice", "":
			return false // keep the request order (the emulator does not price on-demand per zone)
		default:
			if free(a) != free(b) {
				return free(a) > free(b)
			}
		}
		return a.pos < b.pos
	})
}
