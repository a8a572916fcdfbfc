package ec2events

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// DetailHealth is AWS Health's detail type: EC2's scheduled events reach
// EventBridge as AWS Health events (source aws.health; AWS Health User
// Guide, "AWS Health events Amazon EventBridge schema").
const DetailHealth = "AWS Health Event"

// healthCodes maps the AWS Health event type codes of EC2's scheduled
// events to the event codes DescribeInstanceStatus gives them (EC2 User
// Guide, "Scheduled events for Amazon EC2 instances").
var healthCodes = map[string]string{
	"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED":            "instance-retirement",
	"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED": "instance-retirement",
	"AWS_EC2_INSTANCE_STOP_SCHEDULED":                  "instance-stop",
	"AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED":    "instance-reboot",
	"AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED":      "system-reboot",
	"AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED":   "system-maintenance",
	"AWS_EC2_INSTANCE_POWER_MAINTENANCE_SCHEDULED":     "system-maintenance",
}

// maxEntities bounds the instances one event may name.
const maxEntities = 64

type rawHealth struct {
	Service           *string `json:"service"`
	EventTypeCode     *string `json:"eventTypeCode"`
	EventTypeCategory *string `json:"eventTypeCategory"`
	StartTime         *string `json:"startTime"`
	EndTime           *string `json:"endTime"`
	StatusCode        *string `json:"statusCode"`
	AffectedEntities  []struct {
		EntityValue *string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// parseHealthDetail reads and checks an AWS Health event's detail (Parse
// has checked the common fields as for EC2's own): service EC2, category
// scheduledChange, a known event type, a start time, and the instances in
// affectedEntities, each also in resources.
func parseHealthDetail(raw rawEvent, ev *Event) error {
	var d rawHealth
	if len(raw.Detail) == 0 || raw.Detail[0] != '{' {
		return bad("detail", "missing, or not an object")
	}
	if err := json.Unmarshal(raw.Detail, &d); err != nil {
		return bad("detail", "%v", clip(err.Error()))
	}
	if s, err := required("detail.service", d.Service); err != nil {
		return err
	} else if s != "EC2" {
		return bad("detail.service", "%q, want EC2", clip(s))
	}
	if c, err := required("detail.eventTypeCategory", d.EventTypeCategory); err != nil {
		return err
	} else if c != "scheduledChange" {
		return bad("detail.eventTypeCategory", "%q, want scheduledChange", clip(c))
	}
	code, err := required("detail.eventTypeCode", d.EventTypeCode)
	if err != nil {
		return err
	}
	if ev.Code = healthCodes[code]; ev.Code == "" {
		return bad("detail.eventTypeCode", "%q is not one of EC2's scheduled events burst acts on", clip(code))
	}
	if ev.NotBefore, err = healthTime("detail.startTime", d.StartTime); err != nil {
		return err
	}
	if d.EndTime != nil {
		if ev.NotAfter, err = healthTime("detail.endTime", d.EndTime); err != nil {
			return err
		}
	}
	if d.StatusCode != nil {
		// AWS Health's event status: upcoming, open or closed (AWS Health
		// API Reference, EventStatusCode); closed is an event that is over
		switch *d.StatusCode {
		case "upcoming", "open":
		case "closed":
			ev.Closed = true
		default:
			return bad("detail.statusCode", "%q, want upcoming, open or closed", clip(*d.StatusCode))
		}
	}
	if len(d.AffectedEntities) == 0 || len(d.AffectedEntities) > maxEntities {
		return bad("detail.affectedEntities", "%d entries; want the instances (1 to %d)", len(d.AffectedEntities), maxEntities)
	}
	inRes := map[string]bool{}
	for _, r := range raw.Resources {
		inRes[r] = true
	}
	for _, e := range d.AffectedEntities {
		id, err := required("detail.affectedEntities.entityValue", e.EntityValue)
		if err != nil {
			return err
		}
		if !instanceRe.MatchString(id) {
			return bad("detail.affectedEntities.entityValue", "%q is not an instance id", clip(id))
		}
		if !inRes[id] {
			return bad("resources", "do not name %s, an affected entity", id)
		}
		ev.Instances = append(ev.Instances, id)
	}
	ev.InstanceID = ev.Instances[0]
	return nil
}

// healthTime reads AWS Health's times: RFC 1123 in its sample payloads
// ("Wed, 31 Jan 2024 04:30:00 GMT"), RFC 3339 accepted too.
func healthTime(field string, p *string) (time.Time, error) {
	if p == nil {
		return time.Time{}, bad(field, "missing")
	}
	for _, layout := range []string{time.RFC1123, time.RFC3339} {
		if t, err := time.Parse(layout, *p); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, bad(field, "%q is neither an RFC 1123 nor an RFC 3339 time", clip(*p))
}

// StatusEvent is one of an instance's scheduled events as
// DescribeInstanceStatus lists them (InstanceStatusEvent).
type StatusEvent struct {
	InstanceID          string
	EventID             string // instance-event-...
	Code                string // instance-retirement, instance-stop, instance-reboot, system-reboot, system-maintenance
	Description         string
	NotBefore, NotAfter time.Time
}

// StatusCodes are the event codes DescribeInstanceStatus gives EC2's
// scheduled events (EC2 API Reference, InstanceStatusEvent): the EC2
// provider asks for these, FromStatus accepts only these.
var StatusCodes = []string{"instance-reboot", "instance-retirement", "instance-stop", "system-maintenance", "system-reboot"}

// FromStatus is a DescribeInstanceStatus event as the Event its AWS Health
// form parses to (Kind Scheduled, the same code and window), so both
// sources are acted on, and de-duplicated, alike. An event whose
// description begins "[Completed]" (EC2 keeps a completed event listed
// for up to a week: EC2 API Reference, InstanceStatusEvent) or
// "[Canceled]" is Closed.
func FromStatus(se StatusEvent) (Event, error) {
	switch {
	case !instanceRe.MatchString(se.InstanceID):
		return Event{}, bad("InstanceId", "%q is not an instance id", clip(se.InstanceID))
	case !slices.Contains(StatusCodes, se.Code):
		return Event{}, bad("Events.Code", "%q is not one of EC2's scheduled events burst acts on", clip(se.Code))
	case se.NotBefore.IsZero():
		return Event{}, bad("Events.NotBefore", "missing")
	case se.EventID != "" && !idRe.MatchString(se.EventID):
		return Event{}, bad("Events.InstanceEventId", "%q is not an event id", clip(se.EventID))
	}
	d := strings.TrimSpace(se.Description)
	return Event{ID: se.EventID, Kind: Scheduled, InstanceID: se.InstanceID, Instances: []string{se.InstanceID}, Code: se.Code,
		NotBefore: se.NotBefore.UTC(), NotAfter: se.NotAfter.UTC(),
		Closed: strings.HasPrefix(d, "[Completed]") || strings.HasPrefix(d, "[Canceled]")}, nil
}
