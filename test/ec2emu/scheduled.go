package ec2emu

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// ---- EC2 scheduled events ----
//
// EC2 schedules events on instances (EC2 User Guide, "Scheduled events for
// Amazon EC2 instances"): instance-retirement, instance-stop,
// instance-reboot, system-reboot and system-maintenance, each with a
// window (NotBefore, NotAfter). DescribeInstanceStatus lists them, and AWS
// Health sends each to EventBridge as an "AWS Health Event" (source
// aws.health, category scheduledChange; AWS Health User Guide, "AWS Health
// events Amazon EventBridge schema"), which the emulator delivers through
// its event rules like EC2's own events. At NotBefore the emulator does
// what EC2 does to an instance still running: a retirement or a stop ends
// it (terminate, for these instances that cannot be stopped and started
// again by burst), a reboot or maintenance only marks the event completed.

// ScheduledCodes maps DescribeInstanceStatus's event codes to AWS Health's
// event type codes.
var ScheduledCodes = map[string]string{
	"instance-retirement": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
	"instance-stop":       "AWS_EC2_INSTANCE_STOP_SCHEDULED",
	"instance-reboot":     "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED",
	"system-reboot":       "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED",
	"system-maintenance":  "AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED",
}

// ScheduledEvent is one scheduled event of an instance.
type ScheduledEvent struct {
	ID                  string // instance-event-...
	Code                string // instance-retirement, ...
	Description         string
	NotBefore, NotAfter time.Time
}

// ScheduleEvent schedules an event of code on a live instance, from
// notBefore for a window of an hour, and returns its id.
func (s *Server) ScheduleEvent(id, code string, notBefore time.Time) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	health, ok := ScheduledCodes[code]
	if !ok {
		return "", fmt.Errorf("scheduling an event on %s: code %q is not one of EC2's scheduled events", id, code)
	}
	in := s.lookup(id)
	if in == nil || !in.live() {
		return "", fmt.Errorf("scheduling an event on %s: no live instance", id)
	}
	nb := notBefore.UTC().Truncate(time.Second)
	ev := ScheduledEvent{ID: s.newID("instance-event-"), Code: code, NotBefore: nb, NotAfter: nb.Add(time.Hour),
		Description: "The instance is scheduled for " + strings.ReplaceAll(code, "-", " ")}
	in.scheduled = append(in.scheduled, ev)
	s.emitHealth(in, health, ev)
	s.after(max(nb.Sub(s.Now()), 0), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed || !in.live() {
			return
		}
		i := slices.IndexFunc(in.scheduled, func(e ScheduledEvent) bool { return e.ID == ev.ID })
		if i < 0 || strings.HasPrefix(in.scheduled[i].Description, canceledPrefix) {
			return
		}
		// a completed event stays described (EC2 API Reference,
		// InstanceStatusEvent: "for up to a week"), its description
		// beginning [Completed]
		in.scheduled[i].Description = completedPrefix + in.scheduled[i].Description
		if code == "instance-retirement" || code == "instance-stop" {
			s.terminate(in, byScheduledEvent)
		}
	})
	return ev.ID, nil
}

// The description prefixes of a completed and a canceled event.
const (
	completedPrefix = "[Completed] "
	canceledPrefix  = "[Canceled] "
)

// CancelScheduledEvent cancels an event before it begins: it stays
// described, its description beginning [Canceled], and nothing happens to
// the instance at its NotBefore (AWS Health sends nothing for it here).
func (s *Server) CancelScheduledEvent(id, eventID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.lookup(id)
	if in == nil {
		return fmt.Errorf("canceling event %s: no instance %s", eventID, id)
	}
	for i, e := range in.scheduled {
		if e.ID == eventID && !strings.HasPrefix(e.Description, completedPrefix) && !strings.HasPrefix(e.Description, canceledPrefix) {
			in.scheduled[i].Description = canceledPrefix + e.Description
			return nil
		}
	}
	return fmt.Errorf("canceling event %s: %s has no such event to come", eventID, id)
}

// emitHealth sends AWS Health's EventBridge event for ev; s.mu held.
func (s *Server) emitHealth(in *instance, health string, ev ScheduledEvent) {
	if s.closed {
		return
	}
	now := s.Now().UTC()
	e := Event{Version: "0", ID: newUUID(), DetailType: DetailHealth, Source: "aws.health", Account: s.opts.Account,
		Time: now.Format("2006-01-02T15:04:05Z"), Region: s.opts.Region, Resources: []string{in.ID}, Detail: EventDetail{InstanceID: in.ID}}
	rfc1123 := func(t time.Time) string { return t.UTC().Format(time.RFC1123) } // AWS Health's sample payloads' form
	type desc struct {
		Language          string `json:"language"`
		LatestDescription string `json:"latestDescription"`
	}
	type entity struct {
		EntityValue string `json:"entityValue"`
	}
	// the envelope of EC2's own events (Event), AWS Health's detail in
	// place of theirs (the outer field shadows Event.Detail)
	body := struct {
		Event
		Detail struct {
			EventArn          string   `json:"eventArn"`
			Service           string   `json:"service"`
			EventTypeCode     string   `json:"eventTypeCode"`
			EventTypeCategory string   `json:"eventTypeCategory"`
			StartTime         string   `json:"startTime"`
			EndTime           string   `json:"endTime"`
			EventDescription  []desc   `json:"eventDescription"`
			AffectedEntities  []entity `json:"affectedEntities"`
		} `json:"detail"`
	}{Event: e}
	d := &body.Detail
	d.EventArn = fmt.Sprintf("arn:aws:health:%s::event/EC2/%s/%s_%s", s.opts.Region, health, health, strings.TrimPrefix(ev.ID, "instance-event-"))
	d.Service, d.EventTypeCode, d.EventTypeCategory = "EC2", health, "scheduledChange"
	d.StartTime, d.EndTime = rfc1123(ev.NotBefore), rfc1123(ev.NotAfter)
	d.EventDescription = []desc{{"en_US", ev.Description}}
	d.AffectedEntities = []entity{{in.ID}}
	b, _ := json.Marshal(body)
	s.route(e, string(b), now)
}

// ---- DescribeInstanceStatus ----

type xStatusDetail struct {
	Name   string `xml:"name"`
	Status string `xml:"status"`
}

type xStatusSummary struct {
	Status  string                `xml:"status"`
	Details xItems[xStatusDetail] `xml:"details"`
}

type xStatusEvent struct {
	InstanceEventID string `xml:"instanceEventId"`
	Code            string `xml:"code"`
	Description     string `xml:"description"`
	NotBefore       string `xml:"notBefore"`
	NotAfter        string `xml:"notAfter"`
}

type xInstanceStatus struct {
	InstanceID       string                `xml:"instanceId"`
	AvailabilityZone string                `xml:"availabilityZone"`
	EventsSet        *xItems[xStatusEvent] `xml:"eventsSet,omitempty"`
	InstanceState    xState                `xml:"instanceState"`
	SystemStatus     xStatusSummary        `xml:"systemStatus"`
	InstanceStatus   xStatusSummary        `xml:"instanceStatus"`
}

func (s *Server) describeInstanceStatus(q query, _ string) (any, *apiError) {
	ids := q.strings("InstanceId")
	all := q.get("IncludeAllInstances") == "true"
	fs := q.filters()
	for _, f := range fs {
		if !statusFilters[f.name] {
			return nil, errf(400, "InvalidParameterValue", "The filter '%s' is invalid", f.name)
		}
	}
	var list []*instance
	if len(ids) > 0 {
		for _, id := range ids {
			in := s.lookup(id)
			if in == nil {
				return nil, errf(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
			}
			list = append(list, in)
		}
	} else {
		for _, in := range s.instances {
			if s.visible(in) {
				list = append(list, in)
			}
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	}
	var out []xInstanceStatus
	for _, in := range list {
		if !all && in.State != "running" {
			continue
		}
		if !statusMatches(in, fs) {
			continue
		}
		ok := xStatusSummary{Status: "ok", Details: xItems[xStatusDetail]{[]xStatusDetail{{"reachability", "passed"}}}}
		x := xInstanceStatus{InstanceID: in.ID, AvailabilityZone: in.Zone, InstanceState: stateOf(in.State), SystemStatus: ok, InstanceStatus: ok}
		if len(in.scheduled) > 0 {
			x.EventsSet = &xItems[xStatusEvent]{}
			for _, e := range in.scheduled {
				x.EventsSet.Items = append(x.EventsSet.Items, xStatusEvent{e.ID, e.Code, e.Description,
					e.NotBefore.Format("2006-01-02T15:04:05.000Z"), e.NotAfter.Format("2006-01-02T15:04:05.000Z")})
			}
		}
		out = append(out, x)
	}
	return struct {
		XMLName           xml.Name                `xml:"x"`
		InstanceStatusSet xItems[xInstanceStatus] `xml:"instanceStatusSet"`
	}{InstanceStatusSet: xItems[xInstanceStatus]{out}}, nil
}

// statusFilters are the DescribeInstanceStatus filters the emulator
// models (EC2 API Reference, DescribeInstanceStatus: event.code,
// event.instance-event-id, instance-id, availability-zone).
var statusFilters = map[string]bool{"event.code": true, "event.instance-event-id": true, "instance-id": true, "availability-zone": true}

// statusMatches: in passes every filter (an event filter needs one of its
// events to match).
func statusMatches(in *instance, fs []filter) bool {
	for _, f := range fs {
		var ok bool
		switch f.name {
		case "event.code":
			ok = slices.ContainsFunc(in.scheduled, func(e ScheduledEvent) bool { return f.match(e.Code) })
		case "event.instance-event-id":
			ok = slices.ContainsFunc(in.scheduled, func(e ScheduledEvent) bool { return f.match(e.ID) })
		case "instance-id":
			ok = f.match(in.ID)
		case "availability-zone":
			ok = f.match(in.Zone)
		}
		if !ok {
			return false
		}
	}
	return true
}

// Scheduled returns an instance's scheduled events, completed and
// canceled ones too (tests).
func (s *Server) Scheduled(id string) []ScheduledEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.lookup(id); in != nil {
		return slices.Clone(in.scheduled)
	}
	return nil
}
