// Package ec2events parses the EC2 events EventBridge delivers to an SQS
// queue (the message body is the event, as EventBridge's SQS target sends
// it): "EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance
// Recommendation" and "EC2 Instance State-change Notification". One pure
// parser, which validates everything burst acts on: the body is input from
// outside (anyone allowed to send to the queue can put anything in it), so
// sizes are bounded, the source, account and region must be the cluster's,
// and identifiers must have their exact form. Whether the instance is one
// of the cluster's is the caller's check (its tags, internal/notices).
package ec2events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// MaxBody bounds a message body. EC2's events are well under 1 KiB;
// EventBridge's own limit is 256 KiB, which burst has no reason to read.
const MaxBody = 8 << 10

// The detail types burst reads.
const (
	DetailSpotInterruption = "EC2 Spot Instance Interruption Warning"
	DetailRebalance        = "EC2 Instance Rebalance Recommendation"
	DetailStateChange      = "EC2 Instance State-change Notification"
)

// Kind is what an event says.
type Kind string

// Event kinds.
const (
	SpotInterruption Kind = "spot-interruption"
	Rebalance        Kind = "rebalance"
	StateChange      Kind = "state-change"
	Scheduled        Kind = "scheduled" // an EC2 scheduled event, from AWS Health
)

// Event is a validated EC2 event.
type Event struct {
	ID         string    // EventBridge's event id
	Kind       Kind      // from the detail type
	Account    string    // 12 digits
	Region     string    // e.g. us-east-1
	Time       time.Time // when EC2 emitted it (UTC)
	InstanceID string
	// Action is the interruption's instance-action (terminate, stop or
	// hibernate); spot interruptions only.
	Action string
	// State is the instance's new state (pending, running, stopping,
	// stopped, shutting-down, terminated); state changes only.
	State string
	// Scheduled events only (health.go): Code is EC2's event code
	// (instance-retirement, ...), NotBefore and NotAfter its window,
	// Instances every instance it names (InstanceID is the first).
	Code                string
	NotBefore, NotAfter time.Time
	Instances           []string
	// Closed: the scheduled event is over, completed or canceled (AWS
	// Health's statusCode closed; DescribeInstanceStatus's description
	// beginning [Completed] or [Canceled]): nothing to act on.
	Closed bool
}

// Expect is what an event must match to be the cluster's.
type Expect struct {
	Account string // "" accepts any (the queue's own account is then unchecked)
	Region  string // required
}

var (
	accountRe  = regexp.MustCompile(`^[0-9]{12}$`)
	regionRe   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)
	instanceRe = regexp.MustCompile(`^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$`)
	idRe       = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
	// arn:aws:ec2:<region or zone>:[account]:instance/<id>
	resourceRe = regexp.MustCompile(`^arn:aws(?:-[a-z]+)*:ec2:([a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}[a-z]?):(?:([0-9]{12}):)?instance/(i-[0-9a-f]+)$`)
)

var (
	actions = map[string]bool{"terminate": true, "stop": true, "hibernate": true}
	states  = map[string]bool{"pending": true, "running": true, "stopping": true, "stopped": true, "shutting-down": true, "terminated": true}
)

type rawEvent struct {
	Version    *string         `json:"version"`
	ID         *string         `json:"id"`
	DetailType *string         `json:"detail-type"`
	Source     *string         `json:"source"`
	Account    *string         `json:"account"`
	Time       *string         `json:"time"`
	Region     *string         `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

type rawDetail struct {
	InstanceID     *string `json:"instance-id"`
	InstanceAction *string `json:"instance-action"`
	State          *string `json:"state"`
}

// Error is a message burst will not act on, with why.
type Error struct {
	Field string // the event field at fault ("" for the body as a whole)
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "EC2 event: " + e.Msg
	}
	return "EC2 event: " + e.Field + ": " + e.Msg
}

func bad(field, format string, a ...any) error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, a...)}
}

// Parse reads and validates one message body.
func Parse(body []byte, want Expect) (Event, error) {
	raw, err := decode(body)
	if err != nil {
		return Event{}, err
	}
	var ev Event
	if err := parseKind(raw, &ev); err != nil {
		return Event{}, err
	}
	if err := parseOrigin(raw, want, &ev); err != nil {
		return Event{}, err
	}
	if ev.Kind == Scheduled {
		if err := parseHealthDetail(raw, &ev); err != nil {
			return Event{}, err
		}
		return ev, nil
	}
	if err := parseInstanceDetail(raw.Detail, &ev); err != nil {
		return Event{}, err
	}
	if err := checkResources(raw.Resources, ev); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// decode reads the body as one JSON event object, bounded by MaxBody.
func decode(body []byte) (rawEvent, error) {
	var raw rawEvent
	if len(body) > MaxBody {
		return raw, bad("", "message of %d bytes is larger than %d; not an EC2 event", len(body), MaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil {
		return raw, bad("", "not a JSON event object: %v", clip(err.Error()))
	}
	if dec.More() {
		return raw, bad("", "trailing data after the event object")
	}
	return raw, nil
}

// required is a field's value, or an error naming it when it is missing.
func required(field string, p *string) (string, error) {
	if p == nil {
		return "", bad(field, "missing")
	}
	return *p, nil
}

// parseKind checks the version, the source and the event id, and sets
// ev.ID and ev.Kind from the detail type.
func parseKind(raw rawEvent, ev *Event) error {
	v, err := required("version", raw.Version)
	if err != nil {
		return err
	}
	if v != "0" {
		return bad("version", "%q, want \"0\"", clip(v))
	}
	src, err := required("source", raw.Source)
	if err != nil {
		return err
	}
	if src != "aws.ec2" && src != "aws.health" {
		return bad("source", "%q, want aws.ec2 or aws.health (EventBridge rules on EC2's and AWS Health's events)", clip(src))
	}
	if ev.ID, err = required("id", raw.ID); err != nil {
		return err
	}
	if !idRe.MatchString(ev.ID) {
		return bad("id", "%q is not an event id", clip(ev.ID))
	}
	dt, err := required("detail-type", raw.DetailType)
	if err != nil {
		return err
	}
	switch {
	case src == "aws.health" && dt == DetailHealth:
		ev.Kind = Scheduled
	case src == "aws.health":
		return bad("detail-type", "%q is not one burst reads from aws.health (%q)", clip(dt), DetailHealth)
	case dt == DetailSpotInterruption:
		ev.Kind = SpotInterruption
	case dt == DetailRebalance:
		ev.Kind = Rebalance
	case dt == DetailStateChange:
		ev.Kind = StateChange
	default:
		return bad("detail-type", "%q is not one burst reads (%q, %q, %q)", clip(dt), DetailSpotInterruption, DetailRebalance, DetailStateChange)
	}
	return nil
}

// parseOrigin sets ev.Account, ev.Region and ev.Time, checking the account
// and region are the cluster's.
func parseOrigin(raw rawEvent, want Expect, ev *Event) error {
	var err error
	if ev.Account, err = required("account", raw.Account); err != nil {
		return err
	}
	if !accountRe.MatchString(ev.Account) {
		return bad("account", "%q is not a 12-digit account id", clip(ev.Account))
	}
	if want.Account != "" && ev.Account != want.Account {
		return bad("account", "%s is not the cluster's account %s", ev.Account, want.Account)
	}
	if ev.Region, err = required("region", raw.Region); err != nil {
		return err
	}
	if !regionRe.MatchString(ev.Region) {
		return bad("region", "%q is not a region", clip(ev.Region))
	}
	if ev.Region != want.Region {
		return bad("region", "%s is not the cluster's region %s", ev.Region, want.Region)
	}
	ts, err := required("time", raw.Time)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return bad("time", "%q is not an RFC 3339 time", clip(ts))
	}
	ev.Time = t.UTC()
	return nil
}

// parseInstanceDetail reads an EC2 event's detail: the instance, and the
// interruption's action or the state change's new state.
func parseInstanceDetail(detail json.RawMessage, ev *Event) error {
	if len(detail) == 0 || detail[0] != '{' {
		return bad("detail", "missing, or not an object")
	}
	var d rawDetail
	if err := json.Unmarshal(detail, &d); err != nil {
		return bad("detail", "%v", clip(err.Error()))
	}
	var err error
	if ev.InstanceID, err = required("detail.instance-id", d.InstanceID); err != nil {
		return err
	}
	if !instanceRe.MatchString(ev.InstanceID) {
		return bad("detail.instance-id", "%q is not an instance id", clip(ev.InstanceID))
	}
	switch ev.Kind {
	case SpotInterruption:
		if ev.Action, err = required("detail.instance-action", d.InstanceAction); err != nil {
			return err
		}
		if !actions[ev.Action] {
			return bad("detail.instance-action", "%q, want terminate, stop or hibernate", clip(ev.Action))
		}
	case StateChange:
		if ev.State, err = required("detail.state", d.State); err != nil {
			return err
		}
		if !states[ev.State] {
			return bad("detail.state", "%q is not an instance state", clip(ev.State))
		}
	}
	return nil
}

// checkResources: EC2 names the instance in resources (by zone for
// interruption warnings and rebalance recommendations, by region and
// account for state changes); an event whose resources name none, or
// another instance, or another region or account, is not trusted.
func checkResources(res []string, ev Event) error {
	if len(res) == 0 || len(res) > 8 {
		return bad("resources", "%d entries; want the instance's ARN (1 to 8 entries)", len(res))
	}
	for _, r := range res {
		m := resourceRe.FindStringSubmatch(r)
		if m == nil {
			return bad("resources", "%q is not an EC2 instance ARN", clip(r))
		}
		if m[1] != ev.Region && !(strings.HasPrefix(m[1], ev.Region) && len(m[1]) == len(ev.Region)+1) {
			return bad("resources", "%q is not in region %s", clip(r), ev.Region)
		}
		if m[2] != "" && m[2] != ev.Account {
			return bad("resources", "%q is not in account %s", clip(r), ev.Account)
		}
		if m[3] != ev.InstanceID {
			return bad("resources", "%q names another instance than detail.instance-id %s", clip(r), ev.InstanceID)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// Deadline is when EC2 acts on a spot interruption warning: two minutes
// after the event (the warning carries no time of its own, unlike IMDS's
// spot/instance-action).
func (e Event) Deadline() time.Time {
	if e.Kind != SpotInterruption {
		return time.Time{}
	}
	return e.Time.Add(2 * time.Minute)
}

// Gone reports whether a state change means the instance stopped running
// a node (stopping, stopped, shutting-down, terminated).
func (e Event) Gone() bool {
	return e.Kind == StateChange && (e.State == "stopping" || e.State == "stopped" || e.State == "shutting-down" || e.State == "terminated")
}
