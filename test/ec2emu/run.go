package ec2emu

import (
	"encoding/base64"
	"encoding/xml"
)

// ---- RunInstances ----

func (s *Server) runInstances(q query, token string) (any, *apiError) {
	minCount, err1 := q.int("MinCount", 0)
	maxCount, err2 := q.int("MaxCount", 0)
	if err1 != nil || err2 != nil || minCount < 1 || maxCount < minCount {
		return nil, invalid("MinCount and MaxCount must be positive integers with MinCount <= MaxCount")
	}
	var lt *launchTemplate
	if q.has("LaunchTemplate.LaunchTemplateId") || q.has("LaunchTemplate.LaunchTemplateName") {
		var aerr *apiError
		if lt, aerr = s.resolveTemplate(q.sub("LaunchTemplate")); aerr != nil {
			return nil, aerr
		}
	}
	typ := q.get("InstanceType")
	if typ == "" && lt != nil {
		typ = lt.InstanceType
	}
	if _, ok := s.opts.Catalog.Lookup(typ); !ok {
		return nil, invalid("The instance type '%s' does not exist", typ)
	}
	if q.get("ImageId") == "" && (lt == nil || lt.ImageID == "") {
		return nil, errf(400, "MissingParameter", "The request must contain the parameter ImageId")
	}
	subnet, zone := q.get("SubnetId"), q.get("Placement.AvailabilityZone")
	if q.has("NetworkInterface.1.DeviceIndex") {
		if subnet != "" {
			return nil, errf(400, "InvalidParameterCombination", "Network interfaces and an instance-level subnet ID may not be specified on the same request")
		}
		subnet = q.get("NetworkInterface.1.SubnetId")
	} else if lt != nil && len(lt.NICs) > 0 && subnet != "" {
		// the template's interfaces stand for the request's: EC2 takes the
		// subnet on them, not beside them (RunInstances' SubnetId: "If you
		// specify a network interface, you must specify any subnets as part
		// of the network interface"; terraform-provider-aws issue 33536
		// shows EC2's answer to a template with interfaces)
		return nil, errf(400, "InvalidParameterCombination", "Network interfaces and an instance-level subnet ID may not be specified on the same request")
	}
	if subnet != "" {
		z, ok := s.zoneOf(subnet)
		if !ok {
			return nil, errf(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", subnet)
		}
		zone = z
	} else {
		if subnet = s.firstSubnet(zone); subnet == "" {
			return nil, invalid("no subnet in availability zone %q", zone)
		}
		zone, _ = s.zoneOf(subnet)
	}
	var nics []NetworkInterface
	sgs := q.strings("SecurityGroupId")
	if lt != nil {
		nics = lt.NICs
		if len(sgs) == 0 {
			sgs = lt.SGs
		}
	}
	if q.has("NetworkInterface.1.DeviceIndex") {
		nics = parseNICs(q, "NetworkInterface")
	}
	if aerr := s.checkNICs(typ, nics, sgs); aerr != nil {
		return nil, aerr
	}
	if aerr := s.checkPlacementGroup(q.get("Placement.GroupName")); aerr != nil {
		return nil, aerr
	}
	lifecycle := "on-demand"
	if q.get("InstanceMarketOptions.MarketType") == "spot" {
		lifecycle = "spot"
		so := q.sub("InstanceMarketOptions.SpotOptions")
		if t := so.get("SpotInstanceType"); t != "" && t != "one-time" {
			return nil, invalid("this emulator models one-time Spot Instance requests only, got SpotInstanceType %q", t)
		}
		if b := so.get("InstanceInterruptionBehavior"); b != "" && b != "terminate" {
			return nil, errf(400, "InvalidParameterCombination", "The request with type 'one-time' is not supported when instanceInterruptionBehavior is set to '%s'.", b)
		}
	}
	meta, aerr := parseMetadataOptions(q.sub("MetadataOptions"))
	if aerr != nil {
		return nil, aerr
	}
	shutdown, aerr := parseShutdownBehavior(q.get("InstanceInitiatedShutdownBehavior"))
	if aerr != nil {
		return nil, aerr
	}
	base := defaultMetadataOptions()
	if lt != nil {
		base = lt.Meta.over(base)
		if shutdown == "" {
			shutdown = lt.Shutdown
		}
	}
	meta = meta.over(base)
	ud, err := base64.StdEncoding.DecodeString(q.get("UserData"))
	if err != nil {
		return nil, invalid("Invalid BASE64 encoding of user data.")
	}
	if len(ud) == 0 && lt != nil {
		ud = lt.UserData
	}
	crs, targeted, open, aerr := s.crTargets(q.sub("CapacityReservationSpecification"), typ, zone)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := checkBlockMarket(q.get("InstanceMarketOptions.MarketType"), crs, targeted); aerr != nil {
		return nil, aerr
	}
	if targeted && lifecycle == "spot" {
		return nil, errf(400, "InvalidParameterCombination", "a Spot launch cannot target a capacity reservation")
	}
	n := maxCount
	if free := s.poolFree(typ, zone, lifecycle); !targeted && free >= 0 && free < n {
		n = free
	}
	var place []*capReservation
	if targeted {
		free := 0
		for _, cr := range crs {
			free += s.crFree(cr)
		}
		if free < minCount {
			return nil, errf(400, "ReservationCapacityExceeded", "The requested capacity reservation does not have enough available capacity for %d %s instances in %s (%d available).", minCount, typ, zone, free)
		}
		n = min(n, free)
		place = s.crPlace(crs, n)
	}
	limit := s.opts.SpotInstanceLimit
	code := "MaxSpotInstanceCountExceeded"
	if lifecycle == "on-demand" {
		limit, code = s.opts.OnDemandInstanceLimit, "InstanceLimitExceeded"
	}
	if limit > 0 {
		if left := limit - s.liveCount(lifecycle); left < minCount {
			return nil, errf(400, code, "You have requested more instances (%d) than your current instance limit of %d allows.", minCount, limit)
		} else if left < n {
			n = left
		}
	}
	if n < minCount {
		return nil, errf(500, "InsufficientInstanceCapacity", "We currently do not have sufficient %s capacity in the Availability Zone you requested (%s).", typ, zone)
	}
	if !s.takeTokens(n) {
		return nil, errf(503, "RequestLimitExceeded", "Request limit exceeded.")
	}
	tags := q.tagSpecs("TagSpecification")
	res := xReservation{ReservationID: s.newID("r-"), OwnerID: s.opts.Account}
	for i := range n {
		image := q.get("ImageId")
		if image == "" {
			image = lt.ImageID
		}
		in := &instance{Instance: Instance{InstanceType: typ, ImageID: image, Zone: zone, SubnetID: subnet, Lifecycle: lifecycle, LaunchIndex: i,
			UserData: ud, MetadataOptions: meta, ShutdownBehavior: shutdown, ClientToken: token, PlacementGroup: q.get("Placement.GroupName"),
			NetworkInterfaces: nicsOn(nics, subnet)}, reservation: res.ReservationID}
		if lt != nil {
			in.LaunchTemplate = lt.ID
			in.Tags = merge(lt.TagSpecs["instance"], tags["instance"])
		} else {
			in.Tags = merge(tags["instance"])
		}
		ip, err := s.allocIP(in.Instance)
		if err != nil {
			return nil, errf(500, "InternalError", "allocating a private IP: %v", err)
		}
		in.PrivateIP = ip
		switch {
		case targeted:
			in.CapacityReservation = place[i].id
		case open && lifecycle == "on-demand":
			if cr := s.openReservation(typ, zone); cr != nil {
				in.CapacityReservation = cr.id
			}
		}
		if in.CapacityReservation != "" {
			s.launch(in)
			in.holds = false // set-aside capacity, not the zone's pool
		} else {
			s.consume(typ, zone, lifecycle)
			s.launch(in)
		}
		res.InstancesSet.Items = append(res.InstancesSet.Items, s.instanceXML(in))
	}
	return struct {
		XMLName xml.Name `xml:"x"`
		xReservation
	}{xReservation: res}, nil
}
