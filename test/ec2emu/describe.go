package ec2emu

import (
	"encoding/base64"
	"encoding/xml"
	"strconv"
	"strings"
)

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
		case f.name == "instance-state-code":
			v = strconv.Itoa(stateCodes[in.State])
		case f.name == "image-id":
			v = in.ImageID
		case f.name == "launch-index":
			v = strconv.Itoa(in.LaunchIndex)
		case f.name == "reservation-id":
			v = in.reservation
		case f.name == "placement-group-name":
			v = in.PlacementGroup
		case f.name == "state-reason-code":
			v = in.StateReasonCode
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
			in := s.lookup(id)
			if in != nil {
				in = s.describedAs(in)
			}
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
		for _, in := range s.order {
			if in = s.describedAs(in); in != nil {
				cands = append(cands, in)
			}
		}
	}
	var match []*instance
	for _, in := range cands {
		if !s.visible(in) {
			continue
		}
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
			res = append(res, xReservation{ReservationID: in.reservation, OwnerID: s.opts.Account})
		}
		res[i].InstancesSet.Items = append(res[i].InstancesSet.Items, s.instanceXML(in))
	}
	return struct {
		XMLName        xml.Name             `xml:"x"`
		ReservationSet xItems[xReservation] `xml:"reservationSet"`
		NextToken      string               `xml:"nextToken,omitempty"`
	}{ReservationSet: xItems[xReservation]{res}, NextToken: next}, nil
}
