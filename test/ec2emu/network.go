package ec2emu

import (
	"encoding/xml"
	"slices"
)

// The network and image describes (DescribeSubnets, DescribeSecurityGroups,
// DescribeImages) answer what Options.Subnets, SecurityGroups and Images
// declare; an id not declared is EC2's NotFound error. burst-sizer doctor
// calls them.

type xSubnet struct {
	SubnetID         string `xml:"subnetId"`
	AvailabilityZone string `xml:"availabilityZone"`
	State            string `xml:"state"`
}

type xGroup struct {
	GroupID string `xml:"groupId"`
}

type xImage struct {
	ImageID    string `xml:"imageId"`
	ImageState string `xml:"imageState"`
}

func (s *Server) describeSubnets(q query, _ string) (any, *apiError) {
	var out []xSubnet
	ids := q.strings("SubnetId")
	for _, id := range ids {
		az, ok := s.opts.Subnets[id]
		if !ok {
			return nil, errf(400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
		out = append(out, xSubnet{SubnetID: id, AvailabilityZone: az, State: "available"})
	}
	if len(ids) == 0 {
		for id, az := range s.opts.Subnets {
			out = append(out, xSubnet{SubnetID: id, AvailabilityZone: az, State: "available"})
		}
		slices.SortFunc(out, func(a, b xSubnet) int { return compareStrings(a.SubnetID, b.SubnetID) })
	}
	return struct {
		XMLName xml.Name        `xml:"x"`
		Subnets xItems[xSubnet] `xml:"subnetSet"`
	}{Subnets: xItems[xSubnet]{out}}, nil
}

func (s *Server) describeSecurityGroups(q query, _ string) (any, *apiError) {
	var out []xGroup
	ids := q.strings("GroupId")
	for _, id := range ids {
		if !slices.Contains(s.opts.SecurityGroups, id) {
			return nil, errf(400, "InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
		out = append(out, xGroup{GroupID: id})
	}
	if len(ids) == 0 {
		for _, id := range s.opts.SecurityGroups {
			out = append(out, xGroup{GroupID: id})
		}
	}
	return struct {
		XMLName xml.Name       `xml:"x"`
		Groups  xItems[xGroup] `xml:"securityGroupInfo"`
	}{Groups: xItems[xGroup]{out}}, nil
}

func (s *Server) describeImages(q query, _ string) (any, *apiError) {
	var out []xImage
	ids := q.strings("ImageId")
	for _, id := range ids {
		if !slices.Contains(s.opts.Images, id) {
			return nil, errf(400, "InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
		out = append(out, xImage{ImageID: id, ImageState: "available"})
	}
	if len(ids) == 0 {
		for _, id := range s.opts.Images {
			out = append(out, xImage{ImageID: id, ImageState: "available"})
		}
	}
	return struct {
		XMLName xml.Name       `xml:"x"`
		Images  xItems[xImage] `xml:"imagesSet"`
	}{Images: xItems[xImage]{out}}, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Deny makes the emulator answer every call of the EC2 actions (e.g.
// "RunInstances") with UnauthorizedOperation, as EC2 does for an action
// the caller's IAM policy does not allow, DryRun or not. Allow undoes it.
func (s *Server) Deny(actions ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.denied == nil {
		s.denied = map[string]bool{}
	}
	for _, a := range actions {
		s.denied[a] = true
	}
}

// Allow lifts Deny for actions.
func (s *Server) Allow(actions ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range actions {
		delete(s.denied, a)
	}
}

// authorize is EC2's permission check, done before anything else: a denied
// action is UnauthorizedOperation; a permitted DryRun call stops here with
// DryRunOperation (HTTP 412), as EC2 answers "would have succeeded".
func (s *Server) authorize(action string, q query) *apiError {
	if s.denied[action] {
		return errf(403, "UnauthorizedOperation", "You are not authorized to perform this operation. User: arn:aws:iam::%s:user/burst-emulator is not authorized to perform: ec2:%s", s.opts.Account, action)
	}
	if q.get("DryRun") == "true" {
		return errf(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
	}
	return nil
}
