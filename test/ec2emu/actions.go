package ec2emu

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ---- launch templates ----

type xLaunchTemplate struct {
	LaunchTemplateID     string        `xml:"launchTemplateId"`
	LaunchTemplateName   string        `xml:"launchTemplateName"`
	CreateTime           string        `xml:"createTime"`
	CreatedBy            string        `xml:"createdBy"`
	DefaultVersionNumber int           `xml:"defaultVersionNumber"`
	LatestVersionNumber  int           `xml:"latestVersionNumber"`
	TagSet               *xItems[xTag] `xml:"tagSet,omitempty"`
}

func (lt *launchTemplate) xml() xLaunchTemplate {
	x := xLaunchTemplate{LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name,
		CreateTime: lt.Created.UTC().Format("2006-01-02T15:04:05.000Z"), CreatedBy: "arn:aws:iam::123456789012:user/burst",
		DefaultVersionNumber: 1, LatestVersionNumber: 1}
	if len(lt.Tags) > 0 {
		x.TagSet = &xItems[xTag]{Items: sortedTags(lt.Tags)}
	}
	return x
}

func (s *Server) templateByName(name string) *launchTemplate {
	for _, lt := range s.templates {
		if lt.Name == name {
			return lt
		}
	}
	return nil
}

func (s *Server) createLaunchTemplate(q query, _ string) (any, *apiError) {
	name := q.get("LaunchTemplateName")
	if name == "" || len(name) > 128 {
		return nil, errf(400, "MissingParameter", "LaunchTemplateName is required (3-128 characters)")
	}
	if s.templateByName(name) != nil {
		return nil, errf(400, "InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	d := q.sub("LaunchTemplateData")
	ud, err := base64.StdEncoding.DecodeString(d.get("UserData"))
	if err != nil {
		return nil, invalid("Invalid BASE64 encoding of user data.")
	}
	lt := &launchTemplate{ID: s.newID("lt-"), Name: name, ImageID: d.get("ImageId"), InstanceType: d.get("InstanceType"),
		UserData: ud, Profile: d.get("IamInstanceProfile.Name") + d.get("IamInstanceProfile.Arn"),
		SGs: d.strings("SecurityGroupId"), HTTPTokens: d.get("MetadataOptions.HttpTokens"),
		MetadataTags: d.get("MetadataOptions.InstanceMetadataTags") == "enabled",
		TagSpecs:     d.tagSpecs("TagSpecification"), Created: s.Now()}
	if lt.ImageID == "" {
		return nil, errf(400, "MissingParameter", "LaunchTemplateData.ImageId is required by this emulator")
	}
	lt.Tags = q.tagSpecs("TagSpecification")["launch-template"]
	s.templates[lt.ID] = lt
	return struct {
		XMLName        xml.Name        `xml:"x"`
		LaunchTemplate xLaunchTemplate `xml:"launchTemplate"`
	}{LaunchTemplate: lt.xml()}, nil
}

func (s *Server) describeLaunchTemplates(q query, _ string) (any, *apiError) {
	var out []xLaunchTemplate
	names, ids := q.strings("LaunchTemplateName"), q.strings("LaunchTemplateId")
	for _, n := range names {
		lt := s.templateByName(n)
		if lt == nil {
			return nil, errf(400, "InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
		}
		out = append(out, lt.xml())
	}
	for _, id := range ids {
		lt := s.templates[id]
		if lt == nil {
			return nil, errf(400, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
		out = append(out, lt.xml())
	}
	if len(names)+len(ids) == 0 {
		for _, lt := range s.templates {
			out = append(out, lt.xml())
		}
		sort.Slice(out, func(i, j int) bool { return out[i].LaunchTemplateName < out[j].LaunchTemplateName })
	}
	return struct {
		XMLName         xml.Name                `xml:"x"`
		LaunchTemplates xItems[xLaunchTemplate] `xml:"launchTemplates"`
	}{LaunchTemplates: xItems[xLaunchTemplate]{out}}, nil
}

// resolveTemplate finds the template of a LaunchTemplateSpecification.
func (s *Server) resolveTemplate(q query) (*launchTemplate, *apiError) {
	id, name, ver := q.get("LaunchTemplateId"), q.get("LaunchTemplateName"), q.get("Version")
	var lt *launchTemplate
	switch {
	case id != "" && name != "":
		return nil, invalid("specify either the launch template id or its name, not both")
	case id != "":
		if lt = s.templates[id]; lt == nil {
			return nil, errf(400, "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
		}
	case name != "":
		if lt = s.templateByName(name); lt == nil {
			return nil, errf(400, "InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
		}
	default:
		return nil, errf(400, "MissingParameter", "a launch template id or name is required")
	}
	if ver != "" && ver != "$Default" && ver != "$Latest" && ver != "1" {
		return nil, errf(400, "InvalidLaunchTemplateId.VersionNotFound", "Could not find launch template version %s for template %s", ver, lt.ID)
	}
	return lt, nil
}

// ---- CreateFleet ----

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
	SubnetID                   string          `xml:"subnetId"`
	AvailabilityZone           string          `xml:"availabilityZone"`
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
		case limit > 0 && quota <= 0:
			fleetErrs = append(fleetErrs, xFleetError{ov.xml(), lifecycle, quotaCode,
				fmt.Sprintf("You have reached the limit of %d %s instances for this account.", limit, capType)})
		default:
			usable = append(usable, ov)
		}
	}
	order(usable, strategy)

	// Choose where to launch.
	need := total
	if limit > 0 && quota < need {
		need = max(quota, 0)
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
	if launched > 0 && !s.takeTokens(launched) {
		return nil, errf(503, "RequestLimitExceeded", "Request limit exceeded.")
	}
	fleetID := "fleet-" + strings.TrimPrefix(s.newID("x-"), "x-")
	reservation := s.newID("r-")
	var fleetInstances []xFleetInstance
	idx := 0
	for _, t := range plan {
		fi := xFleetInstance{LaunchTemplateAndOverrides: t.ov.xml(), Lifecycle: lifecycle, InstanceType: t.ov.typ, SubnetID: t.ov.subnet, AvailabilityZone: t.ov.zone}
		for range t.n {
			in := &instance{Instance: Instance{InstanceType: t.ov.typ, ImageID: t.ov.lt.ImageID, Zone: t.ov.zone, SubnetID: t.ov.subnet, Lifecycle: lifecycle,
				LaunchIndex: idx, Tags: merge(t.ov.lt.TagSpecs["instance"], tags["instance"]), UserData: t.ov.lt.UserData,
				MetadataTags: t.ov.lt.MetadataTags, LaunchTemplate: t.ov.lt.ID, ClientToken: token, PlacementGroup: t.ov.group},
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

func (s *Server) poolFree(typ, zone, lifecycle string) int {
	if n, ok := s.capacity[poolKey{typ, zone, lifecycle}]; ok {
		return n
	}
	return -1
}

func (s *Server) consume(typ, zone, lifecycle string) {
	k := poolKey{typ, zone, lifecycle}
	if n, ok := s.capacity[k]; ok {
		s.capacity[k] = n - 1
	}
}

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
	lifecycle := "on-demand"
	if q.get("InstanceMarketOptions.MarketType") == "spot" {
		lifecycle = "spot"
	}
	ud, err := base64.StdEncoding.DecodeString(q.get("UserData"))
	if err != nil {
		return nil, invalid("Invalid BASE64 encoding of user data.")
	}
	if len(ud) == 0 && lt != nil {
		ud = lt.UserData
	}
	n := maxCount
	if free := s.poolFree(typ, zone, lifecycle); free >= 0 && free < n {
		n = free
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
	metaTags := q.get("MetadataOptions.InstanceMetadataTags") == "enabled" || (lt != nil && lt.MetadataTags && q.get("MetadataOptions.InstanceMetadataTags") != "disabled")
	res := xReservation{ReservationID: s.newID("r-"), OwnerID: "123456789012"}
	for i := range n {
		image := q.get("ImageId")
		if image == "" {
			image = lt.ImageID
		}
		in := &instance{Instance: Instance{InstanceType: typ, ImageID: image, Zone: zone, SubnetID: subnet, Lifecycle: lifecycle, LaunchIndex: i,
			UserData: ud, MetadataTags: metaTags, ClientToken: token, PlacementGroup: q.get("Placement.GroupName")}, reservation: res.ReservationID}
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
		s.consume(typ, zone, lifecycle)
		s.launch(in)
		res.InstancesSet.Items = append(res.InstancesSet.Items, in.xml())
	}
	return struct {
		XMLName xml.Name `xml:"x"`
		xReservation
	}{xReservation: res}, nil
}

// ---- DescribeInstances ----

func (s *Server) instanceMatches(in *instance, fs []filter) (bool, *apiError) {
	for _, f := range fs {
		var v string
		switch {
		case f.name == "instance-state-name":
			v = in.State
		case f.name == "instance-id":
			v = in.ID
		case f.name == "instance-type":
			v = in.InstanceType
		case f.name == "availability-zone":
			v = in.Zone
		case f.name == "subnet-id":
			v = in.SubnetID
		case f.name == "instance-lifecycle":
			v = in.Lifecycle
			if v == "on-demand" {
				v = ""
			}
		case f.name == "private-ip-address":
			v = in.PrivateIP
		case f.name == "client-token":
			v = in.ClientToken
		case f.name == "tag-key":
			ok := false
			for k := range in.Tags {
				ok = ok || f.match(k)
			}
			if !ok {
				return false, nil
			}
			continue
		case strings.HasPrefix(f.name, "tag:"):
			tv, ok := in.Tags[f.name[4:]]
			if !ok || !f.match(tv) {
				return false, nil
			}
			continue
		default:
			return false, errf(400, "InvalidParameterValue", "The filter '%s' is invalid", f.name)
		}
		if !f.match(v) {
			return false, nil
		}
	}
	return true, nil
}

func (s *Server) describeInstances(q query, _ string) (any, *apiError) {
	ids := q.strings("InstanceId")
	fs := q.filters()
	maxResults, err := q.int("MaxResults", 0)
	if err != nil || (q.has("MaxResults") && (maxResults < 5 || maxResults > 1000)) {
		return nil, invalid("Value ( %s ) for parameter maxResults is invalid. Expecting a value between 5 and 1000.", q.get("MaxResults"))
	}
	if maxResults > 0 && len(ids) > 0 {
		return nil, invalid("The parameter instancesSet cannot be used with the parameter maxResults")
	}
	var cands []*instance
	if len(ids) > 0 {
		var missing []string
		for _, id := range ids {
			in := s.instances[id]
			if in == nil {
				missing = append(missing, id)
				continue
			}
			cands = append(cands, in)
		}
		if len(missing) > 0 {
			return nil, notFound(missing)
		}
	} else {
		cands = s.order
	}
	var match []*instance
	for _, in := range cands {
		ok, aerr := s.instanceMatches(in, fs)
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			match = append(match, in)
		}
	}
	start := 0
	if t := q.get("NextToken"); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
		if err != nil || err2 != nil || n < 0 || n > len(match) {
			return nil, errf(400, "InvalidPaginationToken", "The pagination token is invalid")
		}
		start = n
	}
	end := len(match)
	next := ""
	if maxResults > 0 && start+maxResults < end {
		end = start + maxResults
		next = base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(end)))
	}
	var res []xReservation
	byRes := map[string]int{}
	for _, in := range match[start:end] {
		i, ok := byRes[in.reservation]
		if !ok {
			i = len(res)
			byRes[in.reservation] = i
			res = append(res, xReservation{ReservationID: in.reservation, OwnerID: "123456789012"})
		}
		res[i].InstancesSet.Items = append(res[i].InstancesSet.Items, in.xml())
	}
	return struct {
		XMLName        xml.Name             `xml:"x"`
		ReservationSet xItems[xReservation] `xml:"reservationSet"`
		NextToken      string               `xml:"nextToken,omitempty"`
	}{ReservationSet: xItems[xReservation]{res}, NextToken: next}, nil
}

func notFound(ids []string) *apiError {
	if len(ids) == 1 {
		return errf(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", ids[0])
	}
	return errf(400, "InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(ids, ", "))
}

// ---- TerminateInstances ----

type xStateChange struct {
	InstanceID    string `xml:"instanceId"`
	CurrentState  xState `xml:"currentState"`
	PreviousState xState `xml:"previousState"`
}

func (s *Server) terminateInstances(q query, _ string) (any, *apiError) {
	ids := q.strings("InstanceId")
	if len(ids) == 0 {
		return nil, errf(400, "MissingParameter", "The request must contain the parameter InstanceId")
	}
	if len(ids) > 1000 {
		return nil, invalid("at most 1000 instance IDs per TerminateInstances request, got %d", len(ids))
	}
	var missing []string
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") {
			return nil, errf(400, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		if s.instances[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, notFound(missing)
	}
	var out []xStateChange
	for _, id := range ids {
		in := s.instances[id]
		prev := s.terminate(in)
		out = append(out, xStateChange{id, stateOf(in.State), stateOf(prev)})
	}
	return struct {
		XMLName      xml.Name             `xml:"x"`
		InstancesSet xItems[xStateChange] `xml:"instancesSet"`
	}{InstancesSet: xItems[xStateChange]{out}}, nil
}

// ---- CreateTags ----

func (s *Server) createTags(q query, _ string) (any, *apiError) {
	ids := q.strings("ResourceId")
	tags := map[string]string{}
	for _, t := range q.list("Tag") {
		if t.get("Key") == "" {
			return nil, invalid("Tag keys must not be empty")
		}
		tags[t.get("Key")] = t.get("Value")
	}
	if len(ids) == 0 || len(tags) == 0 {
		return nil, errf(400, "MissingParameter", "ResourceId and Tag are required")
	}
	for _, id := range ids {
		if s.instances[id] == nil && s.templates[id] == nil {
			if strings.HasPrefix(id, "i-") {
				return nil, notFound([]string{id})
			}
			return nil, errf(400, "InvalidID", "The ID '%s' is not valid", id)
		}
	}
	for _, id := range ids {
		if in := s.instances[id]; in != nil {
			for k, v := range tags {
				in.Tags[k] = v
			}
		} else {
			lt := s.templates[id]
			lt.Tags = merge(lt.Tags, tags)
		}
	}
	return struct {
		XMLName xml.Name `xml:"x"`
		Return  bool     `xml:"return"`
	}{Return: true}, nil
}

// ---- DescribeSpotPriceHistory ----

type xSpotPrice struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	InstanceType       string `xml:"instanceType"`
	ProductDescription string `xml:"productDescription"`
	SpotPrice          string `xml:"spotPrice"`
	Timestamp          string `xml:"timestamp"`
}

func (s *Server) describeSpotPriceHistory(q query, _ string) (any, *apiError) {
	types := q.strings("InstanceType")
	if len(types) == 0 {
		for _, t := range s.opts.Catalog.All() {
			if t.NVIDIA() {
				types = append(types, t.Name)
			}
		}
	}
	zones := map[string]bool{}
	for _, z := range s.opts.Subnets {
		zones[z] = true
	}
	var zl []string
	if z := q.get("AvailabilityZone"); z != "" {
		zl = []string{z}
	} else {
		for z := range zones {
			zl = append(zl, z)
		}
		sort.Strings(zl)
	}
	now := s.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	var out []xSpotPrice
	for _, t := range types {
		if _, ok := s.opts.Catalog.Lookup(t); !ok {
			return nil, invalid("The instance type '%s' does not exist", t)
		}
		for _, z := range zl {
			if p := s.spotPrice(t, z); p > 0 {
				out = append(out, xSpotPrice{z, t, "Linux/UNIX", strconv.FormatFloat(p, 'f', 6, 64), now})
			}
		}
	}
	return struct {
		XMLName             xml.Name           `xml:"x"`
		SpotPriceHistorySet xItems[xSpotPrice] `xml:"spotPriceHistorySet"`
		NextToken           string             `xml:"nextToken"`
	}{SpotPriceHistorySet: xItems[xSpotPrice]{out}}, nil
}

// ---- DescribeInstanceTypes ----

type xMem struct {
	SizeInMiB int `xml:"sizeInMiB"`
}

type xGPU struct {
	Name         string `xml:"name"`
	Manufacturer string `xml:"manufacturer"`
	Count        int    `xml:"count"`
	MemoryInfo   xMem   `xml:"memoryInfo"`
}

type xInstanceType struct {
	InstanceType          string         `xml:"instanceType"`
	CurrentGeneration     bool           `xml:"currentGeneration"`
	SupportedUsageClasses xItems[string] `xml:"supportedUsageClasses"`
	VCPUInfo              struct {
		DefaultVCpus int `xml:"defaultVCpus"`
	} `xml:"vCpuInfo"`
	MemoryInfo xMem `xml:"memoryInfo"`
	GPUInfo    *struct {
		GPUs                xItems[xGPU] `xml:"gpus"`
		TotalGpuMemoryInMiB int          `xml:"totalGpuMemoryInMiB"`
	} `xml:"gpuInfo,omitempty"`
}

func (s *Server) describeInstanceTypes(q query, _ string) (any, *apiError) {
	names := q.strings("InstanceType")
	all := len(names) == 0
	if all {
		for _, t := range s.opts.Catalog.All() {
			names = append(names, t.Name)
		}
	}
	start := 0
	if t := q.get("NextToken"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 || n > len(names) {
			return nil, errf(400, "InvalidPaginationToken", "The pagination token is invalid")
		}
		start = n
	}
	maxResults, err := q.int("MaxResults", 100)
	if err != nil || maxResults < 5 || maxResults > 100 {
		return nil, invalid("MaxResults must be between 5 and 100")
	}
	end, next := len(names), ""
	if all && start+maxResults < end {
		end = start + maxResults
		next = strconv.Itoa(end)
	}
	var out []xInstanceType
	for _, n := range names[start:end] {
		t, ok := s.opts.Catalog.Lookup(n)
		if !ok {
			return nil, errf(400, "InvalidInstanceType", "The following supplied instance types do not exist: [%s]", n)
		}
		x := xInstanceType{InstanceType: t.Name, CurrentGeneration: true, MemoryInfo: xMem{t.MemoryMiB},
			SupportedUsageClasses: xItems[string]{[]string{"on-demand", "spot"}}}
		x.VCPUInfo.DefaultVCpus = t.VCPU
		if t.GPUs > 0 {
			x.GPUInfo = &struct {
				GPUs                xItems[xGPU] `xml:"gpus"`
				TotalGpuMemoryInMiB int          `xml:"totalGpuMemoryInMiB"`
			}{GPUs: xItems[xGPU]{[]xGPU{{strings.ToUpper(t.GPUModel), title(t.GPUManufacturer), t.GPUs, xMem{t.GPUMemoryMiB}}}},
				TotalGpuMemoryInMiB: t.TotalGPUMemoryMiB()}
		}
		out = append(out, x)
	}
	return struct {
		XMLName         xml.Name              `xml:"x"`
		InstanceTypeSet xItems[xInstanceType] `xml:"instanceTypeSet"`
		NextToken       string                `xml:"nextToken,omitempty"`
	}{InstanceTypeSet: xItems[xInstanceType]{out}, NextToken: next}, nil
}

func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
