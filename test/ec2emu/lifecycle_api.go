package ec2emu

import (
	"encoding/base64"
	"encoding/xml"
	"strings"
)

type xStateChange struct {
	InstanceID    string `xml:"instanceId"`
	CurrentState  xState `xml:"currentState"`
	PreviousState xState `xml:"previousState"`
}

type xStateChanges struct {
	XMLName      xml.Name             `xml:"x"`
	InstancesSet xItems[xStateChange] `xml:"instancesSet"`
}

// instanceIDs reads InstanceId.N, all of which must exist (and still be
// visible); s.mu held.
func (s *Server) instanceIDs(q query, action string) ([]*instance, *apiError) {
	ids := q.strings("InstanceId")
	if len(ids) == 0 {
		return nil, errf(400, "MissingParameter", "The request must contain the parameter InstanceId")
	}
	if len(ids) > 1000 {
		return nil, invalid("at most 1000 instance IDs per %s request, got %d", action, len(ids))
	}
	var missing []string
	var out []*instance
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") {
			return nil, errf(400, "InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		in := s.lookup(id)
		if in == nil {
			missing = append(missing, id)
			continue
		}
		out = append(out, in)
	}
	if len(missing) > 0 {
		return nil, notFound(missing)
	}
	return out, nil
}

func notFound(ids []string) *apiError {
	if len(ids) == 1 {
		return errf(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", ids[0])
	}
	return errf(400, "InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(ids, ", "))
}

// ---- TerminateInstances ----

func (s *Server) terminateInstances(q query, _ string) (any, *apiError) {
	ins, aerr := s.instanceIDs(q, "TerminateInstances")
	if aerr != nil {
		return nil, aerr
	}
	var out []xStateChange
	for _, in := range ins {
		prev := s.terminate(in, byUser)
		out = append(out, xStateChange{in.ID, stateOf(in.State), stateOf(prev)})
	}
	return xStateChanges{InstancesSet: xItems[xStateChange]{out}}, nil
}

// ---- StopInstances ----

func (s *Server) stopInstances(q query, _ string) (any, *apiError) {
	ins, aerr := s.instanceIDs(q, "StopInstances")
	if aerr != nil {
		return nil, aerr
	}
	if q.get("Hibernate") == "true" {
		return nil, errf(400, "UnsupportedHibernationConfiguration", "The instance does not have hibernation configured; this emulator does not model hibernation.")
	}
	for _, in := range ins {
		switch {
		case in.Lifecycle == "spot":
			return nil, errf(400, "UnsupportedOperation", "You can't stop the Spot Instance '%s' because it is associated with a one-time Spot Instance request. You can only stop Spot Instances associated with persistent Spot Instance requests.", in.ID)
		case in.State != "running" && in.State != "stopping" && in.State != "stopped":
			return nil, errf(400, "IncorrectInstanceState", "This instance '%s' is not in a state from which it can be stopped.", in.ID)
		}
	}
	var out []xStateChange
	for _, in := range ins {
		prev := in.State
		if prev == "running" {
			s.stop(in, byUser)
		}
		out = append(out, xStateChange{in.ID, stateOf(in.State), stateOf(prev)})
	}
	return xStateChanges{InstancesSet: xItems[xStateChange]{out}}, nil
}

// ---- StartInstances ----

func (s *Server) startInstances(q query, _ string) (any, *apiError) {
	ins, aerr := s.instanceIDs(q, "StartInstances")
	if aerr != nil {
		return nil, aerr
	}
	need := map[poolKey]int{}
	starting := 0
	for _, in := range ins {
		switch in.State {
		case "stopped":
			need[poolKey{in.InstanceType, in.Zone, in.Lifecycle}]++
			starting++
		case "pending", "running":
		default:
			return nil, errf(400, "IncorrectInstanceState", "The instance '%s' is not in a state from which it can be started.", in.ID)
		}
	}
	// Starting takes capacity again: a stopped instance holds none.
	for k, n := range need {
		if free := s.poolFree(k.typ, k.zone, k.capacity); free >= 0 && free < n {
			return nil, errf(500, "InsufficientInstanceCapacity", "We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing a different Availability Zone.", k.typ, k.zone, k.typ)
		}
	}
	if limit := s.opts.OnDemandInstanceLimit; limit > 0 && starting > 0 && s.liveCount("on-demand")+starting > limit {
		return nil, errf(400, "InstanceLimitExceeded", "You have requested more instances (%d) than your current instance limit of %d allows.", s.liveCount("on-demand")+starting, limit)
	}
	var out []xStateChange
	for _, in := range ins {
		prev := in.State
		if prev == "stopped" {
			s.startStopped(in)
		}
		out = append(out, xStateChange{in.ID, stateOf(in.State), stateOf(prev)})
	}
	return xStateChanges{InstancesSet: xItems[xStateChange]{out}}, nil
}

// ---- DescribeInstanceAttribute ----

func (s *Server) describeInstanceAttribute(q query, _ string) (any, *apiError) {
	id, attr := q.get("InstanceId"), q.get("Attribute")
	if id == "" || attr == "" {
		return nil, errf(400, "MissingParameter", "The request must contain the parameters InstanceId and Attribute")
	}
	in := s.lookup(id)
	if in == nil {
		return nil, notFound([]string{id})
	}
	var v string
	switch attr {
	case "instanceInitiatedShutdownBehavior":
		v = in.ShutdownBehavior
	case "instanceType":
		v = in.InstanceType
	case "userData":
		v = base64.StdEncoding.EncodeToString(in.UserData)
	default:
		return nil, invalid("Value (%s) for parameter attribute is invalid. This emulator models instanceInitiatedShutdownBehavior, instanceType and userData.", attr)
	}
	type value struct {
		Value string `xml:"value"`
	}
	out := struct {
		XMLName    xml.Name `xml:"x"`
		InstanceID string   `xml:"instanceId"`
		Shutdown   *value   `xml:"instanceInitiatedShutdownBehavior,omitempty"`
		Type       *value   `xml:"instanceType,omitempty"`
		UserData   *value   `xml:"userData,omitempty"`
	}{InstanceID: in.ID}
	switch attr {
	case "instanceInitiatedShutdownBehavior":
		out.Shutdown = &value{v}
	case "instanceType":
		out.Type = &value{v}
	default:
		out.UserData = &value{v}
	}
	return out, nil
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
		if s.lookup(id) == nil && s.templates[id] == nil {
			if strings.HasPrefix(id, "i-") {
				return nil, notFound([]string{id})
			}
			return nil, errf(400, "InvalidID", "The ID '%s' is not valid", id)
		}
	}
	for _, id := range ids {
		if in := s.lookup(id); in != nil {
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
