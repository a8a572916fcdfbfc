package ec2emu

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// EventBridge detail types of the EC2 events the emulator emits.
const (
	DetailSpotInterruption = "EC2 Spot Instance Interruption Warning"
	DetailRebalance        = "EC2 Instance Rebalance Recommendation"
	DetailStateChange      = "EC2 Instance State-change Notification"
	// DetailHealth is AWS Health's (source aws.health): EC2's scheduled
	// events (scheduled.go)
	DetailHealth = "AWS Health Event"
)

// Event is an EventBridge event from source aws.ec2, as EventBridge puts it
// in an SQS message body (compact JSON, fields in this order).
type Event struct {
	Version    string      `json:"version"`
	ID         string      `json:"id"`
	DetailType string      `json:"detail-type"`
	Source     string      `json:"source"`
	Account    string      `json:"account"`
	Time       string      `json:"time"`
	Region     string      `json:"region"`
	Resources  []string    `json:"resources"`
	Detail     EventDetail `json:"detail"`
}

// EventDetail is the detail of the three EC2 events.
type EventDetail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action,omitempty"` // spot interruption: "terminate"
	State          string `json:"state,omitempty"`           // state change: the new state
}

// EventRule is an EventBridge rule on the default bus (event pattern
// source aws.ec2 + detail-type) whose target is one of the emulator's SQS
// queues.
type EventRule struct {
	Name        string   // default "rule-N"
	Queue       string   // queue name; created with default attributes when missing
	DetailTypes []string // default: the three EC2 detail types and AWS Health's
	States      []string // state-change events only with these detail.state values; default all
	// Delay holds each delivery back (emulated time), e.g. to let the node
	// agent see a notice first.
	Delay time.Duration
	// DropFraction of matching events is never delivered (1 = all),
	// standing in for a lost rule or a dead pipeline.
	DropFraction float64
	// DuplicateFraction of deliveries arrive twice (EventBridge and SQS
	// standard queues are at-least-once).
	DuplicateFraction float64
	// Jitter adds a random extra delay in [0, Jitter) to each delivery
	// (emulated time), so events arrive out of order (standard queues do
	// not keep order).
	Jitter time.Duration
}

type eventRule struct {
	EventRule
}

// EventRecord is one emitted event and what became of it.
type EventRecord struct {
	Event  Event
	Body   string // the message body delivered
	Rule   string // the rule that matched, "" when none
	Queue  string
	Status string // "unmatched", "pending", "delivered", "dropped", "no-queue"
	Copies int    // messages delivered (2 for a duplicate)
	// Deliveries holds when each copy is (or was) due, one entry per
	// copy (none when dropped); with Jitter each copy has its own time.
	Deliveries []time.Time
}

// AddEventRule adds a rule; the returned func removes it. Several rules may
// match one event (each delivers its own copy, as EventBridge does).
func (s *Server) AddEventRule(r EventRule) (remove func(), err error) {
	if r.Queue == "" {
		return nil, fmt.Errorf("event rule: no target queue")
	}
	if r.DropFraction < 0 || r.DropFraction > 1 || r.DuplicateFraction < 0 || r.DuplicateFraction > 1 {
		return nil, fmt.Errorf("event rule: DropFraction and DuplicateFraction must be within 0..1")
	}
	if r.Jitter < 0 {
		return nil, fmt.Errorf("event rule: negative Jitter %v", r.Jitter)
	}
	for _, d := range r.DetailTypes {
		if d != DetailSpotInterruption && d != DetailRebalance && d != DetailStateChange && d != DetailHealth {
			return nil, fmt.Errorf("event rule: detail type %q is not one the emulator emits (%q, %q, %q, %q)", d, DetailSpotInterruption, DetailRebalance, DetailStateChange, DetailHealth)
		}
	}
	if len(r.DetailTypes) == 0 {
		r.DetailTypes = []string{DetailSpotInterruption, DetailRebalance, DetailStateChange, DetailHealth}
	}
	if _, err := s.sqs.ensureQueue(r.Queue); err != nil {
		return nil, fmt.Errorf("event rule: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Name == "" {
		r.Name = fmt.Sprintf("rule-%d", len(s.rules)+1)
	}
	er := &eventRule{EventRule: r}
	s.rules = append(s.rules, er)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.rules = slices.DeleteFunc(s.rules, func(x *eventRule) bool { return x == er })
	}, nil
}

// Events returns every emitted event, oldest first.
func (s *Server) Events() []EventRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]EventRecord, 0, len(s.events))
	for _, e := range s.events {
		c := *e
		c.Event.Resources = slices.Clone(e.Event.Resources)
		c.Deliveries = slices.Clone(e.Deliveries)
		out = append(out, c)
	}
	return out
}

func (r *eventRule) matches(e *Event) bool {
	if !slices.Contains(r.DetailTypes, e.DetailType) {
		return false
	}
	return e.DetailType != DetailStateChange || len(r.States) == 0 || slices.Contains(r.States, e.Detail.State)
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// emitState emits the state-change event of the instance's new state; s.mu held.
func (s *Server) emitState(in *instance) {
	s.emitAt(in.changedAt, DetailStateChange, in, EventDetail{InstanceID: in.ID, State: in.State})
}

// emit records an event and delivers it through the rules that match; s.mu held.
func (s *Server) emit(detailType string, in *instance, d EventDetail) {
	s.emitAt(s.Now(), detailType, in, d)
}

// emitAt is emit of something that happened at t.
func (s *Server) emitAt(t time.Time, detailType string, in *instance, d EventDetail) {
	if s.closed {
		return
	}
	now := t.UTC()
	e := Event{Version: "0", ID: newUUID(), DetailType: detailType, Source: "aws.ec2", Account: s.opts.Account,
		Time: now.Format("2006-01-02T15:04:05Z"), Region: s.opts.Region, Detail: d}
	// As EC2 sends them: interruption warnings and rebalance
	// recommendations name the instance by zone, state changes by region
	// and account.
	if detailType == DetailStateChange {
		e.Resources = []string{fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", s.opts.Region, s.opts.Account, in.ID)}
	} else {
		e.Resources = []string{fmt.Sprintf("arn:aws:ec2:%s:instance/%s", in.Zone, in.ID)}
	}
	body, _ := json.Marshal(e)
	s.route(e, string(body), now)
}

// route delivers an event's body through the rules that match e and
// records it; s.mu held.
func (s *Server) route(e Event, body string, now time.Time) {
	matched := false
	for _, r := range s.rules {
		if !r.matches(&e) {
			continue
		}
		matched = true
		rec := &EventRecord{Event: e, Body: body, Rule: r.Name, Queue: r.Queue, Status: "pending"}
		s.events = append(s.events, rec)
		if r.DropFraction > 0 && s.rng.Float64() < r.DropFraction {
			rec.Status = "dropped"
			continue
		}
		copies := 1
		if r.DuplicateFraction > 0 && s.rng.Float64() < r.DuplicateFraction {
			copies = 2
		}
		delay := max(r.Delay, 0)
		if r.Jitter > 0 {
			// each copy on its own: a duplicate may come before or after
			for range copies {
				d := delay + jitter(s.rng, r.Jitter)
				rec.Deliveries = append(rec.Deliveries, now.Add(d))
				s.after(d, func() {
					s.mu.Lock()
					defer s.mu.Unlock()
					if !s.closed {
						s.deliver(rec, 1)
					}
				})
			}
			continue
		}
		for range copies {
			rec.Deliveries = append(rec.Deliveries, now.Add(delay))
		}
		if r.Delay <= 0 {
			s.deliver(rec, copies)
			continue
		}
		s.after(r.Delay, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if !s.closed {
				s.deliver(rec, copies)
			}
		})
	}
	if !matched {
		s.events = append(s.events, &EventRecord{Event: e, Body: body, Status: "unmatched"})
	}
}

// deliver puts copies of the record's body in its queue; s.mu held.
func (s *Server) deliver(rec *EventRecord, copies int) {
	for range copies {
		if !s.sqs.deliver(rec.Queue, rec.Body) {
			rec.Status = "no-queue"
			return
		}
		rec.Copies++
	}
	rec.Status = "delivered"
}
