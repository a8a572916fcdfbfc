package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// DetailStateChange is EventBridge's detail-type of EC2's state changes.
const DetailStateChange = "EC2 Instance State-change Notification"

// StateChange is one "EC2 Instance State-change Notification".
type StateChange struct {
	InstanceID string
	State      string // pending, running, stopping, stopped, shutting-down, terminated
	At         time.Time
}

// ErrNotStateChange marks a message that is another event (an
// interruption warning, a rebalance recommendation): not an error of the
// queue, just not the ledger's.
var ErrNotStateChange = errors.New("not an EC2 state-change event")

var states = map[string]bool{"pending": true, "running": true, "stopping": true, "stopped": true, "shutting-down": true, "terminated": true}

// ParseStateChange reads an SQS message body holding an EventBridge event
// as EC2 sends it: source aws.ec2, detail-type "EC2 Instance State-change
// Notification", time (RFC 3339, whole seconds: the moment of the
// transition), detail.instance-id and detail.state.
func ParseStateChange(body string) (StateChange, error) {
	var e struct {
		Source     string `json:"source"`
		DetailType string `json:"detail-type"`
		Time       string `json:"time"`
		Detail     struct {
			InstanceID string `json:"instance-id"`
			State      string `json:"state"`
		} `json:"detail"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return StateChange{}, fmt.Errorf("not an EventBridge event: %w", err)
	}
	if e.Source != "aws.ec2" || e.DetailType != DetailStateChange {
		return StateChange{}, fmt.Errorf("%w (source %q, detail-type %q)", ErrNotStateChange, e.Source, e.DetailType)
	}
	id := e.Detail.InstanceID
	if !strings.HasPrefix(id, "i-") || len(id) > 32 {
		return StateChange{}, fmt.Errorf("state-change event with instance id %q", id)
	}
	if !states[e.Detail.State] {
		return StateChange{}, fmt.Errorf("state-change event of %s with state %q", id, e.Detail.State)
	}
	at, err := time.Parse(time.RFC3339, e.Time)
	if err != nil {
		return StateChange{}, fmt.Errorf("state-change event of %s: time %q: %w", id, e.Time, err)
	}
	return StateChange{InstanceID: id, State: e.Detail.State, At: at.UTC()}, nil
}
