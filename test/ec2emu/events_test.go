package ec2emu_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

// eventBody is an EventBridge event as a consumer decodes it, written from
// the EC2 User Guide's examples.
type eventBody struct {
	Version    string   `json:"version"`
	ID         string   `json:"id"`
	DetailType string   `json:"detail-type"`
	Source     string   `json:"source"`
	Account    string   `json:"account"`
	Time       string   `json:"time"`
	Region     string   `json:"region"`
	Resources  []string `json:"resources"`
	Detail     struct {
		InstanceID     string `json:"instance-id"`
		InstanceAction string `json:"instance-action"`
		State          string `json:"state"`
	} `json:"detail"`
}

type received struct {
	ev     eventBody
	sentMS int64
}

// drain long-polls the queue until want messages arrived, deleting them.
func drain(t *testing.T, q *sqs.Client, url string, want int) []received {
	t.Helper()
	ctx := context.Background()
	var out []received
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 20,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"SentTimestamp"}},
			// A kept-alive connection that Go's transport closes under a
			// read ("use of closed network connection", a 200 with no body:
			// aws-sdk-go-v2#1825) is retried, as burst's own clients do; the
			// one-attempt default stays for the fault tests.
			func(o *sqs.Options) { o.RetryMaxAttempts = 3 })
		if err != nil {
			t.Fatal(err)
		}
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range r.Messages {
			var e eventBody
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &e); err != nil {
				t.Fatalf("message body is not an event: %v: %s", err, aws.ToString(m.Body))
			}
			ms, _ := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64)
			out = append(out, received{e, ms})
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(del) > 0 {
			if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestEC2EventsReachTheQueue(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 100, BootDelay: time.Second, ShutdownDelay: time.Second, NoticePeriod: 10 * time.Second})
	if _, err := s.AddEventRule(ec2emu.EventRule{Queue: "burst-interruptions"}); err != nil {
		t.Fatal(err)
	}
	q := sqsClient(s)
	url, ok := s.QueueURL("burst-interruptions")
	if !ok {
		t.Fatal("the rule's queue was not created")
	}
	id := launch1(t, c, true)
	waitState(t, c, id, "running")
	if err := s.Rebalance(id); err != nil {
		t.Fatal(err)
	}
	if err := s.Interrupt(id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, "terminated")
	got := drain(t, q, url, 6)
	var seq []string
	for _, r := range got {
		e := r.ev
		what := e.DetailType
		switch e.DetailType {
		case ec2emu.DetailStateChange:
			what = e.Detail.State
			if len(e.Resources) != 1 || e.Resources[0] != "arn:aws:ec2:us-east-1:123456789012:instance/"+id {
				t.Errorf("state change resources %v", e.Resources)
			}
		case ec2emu.DetailSpotInterruption:
			if e.Detail.InstanceAction != "terminate" {
				t.Errorf("instance-action %q", e.Detail.InstanceAction)
			}
			fallthrough
		case ec2emu.DetailRebalance:
			if len(e.Resources) != 1 || e.Resources[0] != "arn:aws:ec2:us-east-1a:instance/"+id {
				t.Errorf("%s resources %v", e.DetailType, e.Resources)
			}
		}
		seq = append(seq, what)
		if _, err := time.Parse(time.RFC3339, e.Time); err != nil || !strings.HasSuffix(e.Time, "Z") {
			t.Errorf("time %q: %v", e.Time, err)
		}
		if e.Version != "0" || e.Source != "aws.ec2" || e.Account != "123456789012" || e.Region != "us-east-1" || e.Detail.InstanceID != id || !uuidRE.MatchString(e.ID) {
			t.Errorf("event %+v", e)
		}
	}
	want := "pending,running," + ec2emu.DetailRebalance + "," + ec2emu.DetailSpotInterruption + ",shutting-down,terminated"
	if strings.Join(seq, ",") != want {
		t.Errorf("events %s\nwant %s", strings.Join(seq, ","), want)
	}
	// The interruption warning came a notice period before the termination began.
	var warned, ended time.Time
	for _, r := range got {
		at, _ := time.Parse(time.RFC3339, r.ev.Time)
		switch {
		case r.ev.DetailType == ec2emu.DetailSpotInterruption:
			warned = at
		case r.ev.Detail.State == "shutting-down":
			ended = at
		}
	}
	if d := ended.Sub(warned); d < 9*time.Second {
		t.Errorf("terminated %v after the warning, want the 10 s notice period", d)
	}
}

func TestEventRulesDelayDropDuplicateAndFilter(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 1000, BootDelay: -1, ShutdownDelay: -1})
	q := sqsClient(s)
	for _, r := range []ec2emu.EventRule{
		{Name: "late", Queue: "late", Delay: 30 * time.Second, DetailTypes: []string{ec2emu.DetailStateChange}},
		{Name: "lost", Queue: "lost", DropFraction: 1},
		{Name: "twice", Queue: "twice", DuplicateFraction: 1, DetailTypes: []string{ec2emu.DetailStateChange}, States: []string{"terminated"}},
	} {
		if _, err := s.AddEventRule(r); err != nil {
			t.Fatal(err)
		}
	}
	// Rules can come through the control endpoint too.
	resp, err := http.Post(s.URL()+"/_emu/event-rule", "application/json", strings.NewReader(`{"Name":"http","Queue":"http","Delay":"1s","States":["running"]}`))
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("POST /_emu/event-rule: %v %v", resp, err)
	}
	resp.Body.Close()
	if _, err := s.AddEventRule(ec2emu.EventRule{Queue: "x", DetailTypes: []string{"EC2 Instance Launch"}}); err == nil {
		t.Error("a rule for an event EC2 does not emit was accepted")
	}
	id := launch1(t, c, false)
	waitState(t, c, id, "running")
	if _, err := c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, "terminated")
	url := func(name string) string { u, _ := s.QueueURL(name); return u }

	late := drain(t, q, url("late"), 4)
	for _, r := range late {
		at, _ := time.Parse(time.RFC3339, r.ev.Time)
		if sent := time.UnixMilli(r.sentMS); sent.Sub(at) < 29*time.Second {
			t.Errorf("%s delivered %v after it happened, want the 30 s delay", r.ev.Detail.State, sent.Sub(at))
		}
	}
	twice := drain(t, q, url("twice"), 2)
	if len(twice) != 2 || twice[0].ev.ID != twice[1].ev.ID || twice[0].ev.Detail.State != "terminated" {
		t.Errorf("duplicated terminated event: %+v", twice)
	}
	if got := drain(t, q, url("http"), 1); len(got) != 1 || got[0].ev.Detail.State != "running" {
		t.Errorf("rule from the control endpoint: %+v", got)
	}
	r, err := q.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url("lost"))})
	if err != nil || len(r.Messages) != 0 {
		t.Errorf("dropping rule delivered %+v %v", r, err)
	}
	dropped := 0
	for _, e := range s.Events() {
		if e.Rule == "lost" {
			if e.Status != "dropped" {
				t.Errorf("lost event status %q", e.Status)
			}
			dropped++
		}
	}
	if dropped != 4 {
		t.Errorf("%d events dropped, want the 4 state changes", dropped)
	}
}

// A jittered duplicate records each copy's own due time, within the jitter
// after the event: the record of what EventBridge did, which fault tests
// read to show that a later event overtook an earlier one.
func TestEventRuleJitterRecordsEveryCopy(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 1000, BootDelay: -1, ShutdownDelay: -1})
	if _, err := s.AddEventRule(ec2emu.EventRule{Name: "j", Queue: "j", DuplicateFraction: 1, Jitter: 20 * time.Second, DetailTypes: []string{ec2emu.DetailStateChange}}); err != nil {
		t.Fatal(err)
	}
	id := launch1(t, c, false)
	waitState(t, c, id, "running")
	n := 0
	for _, e := range s.Events() {
		if e.Rule != "j" {
			continue
		}
		n++
		at, _ := time.Parse(time.RFC3339, e.Event.Time)
		if len(e.Deliveries) != 2 {
			t.Fatalf("%s: %d delivery times recorded, want one per copy (2)", e.Event.Detail.State, len(e.Deliveries))
		}
		for _, d := range e.Deliveries {
			if d.Before(at.Add(-time.Second)) || d.After(at.Add(21*time.Second)) {
				t.Errorf("%s happened %v, copy due %v: outside the 20 s jitter", e.Event.Detail.State, at, d)
			}
		}
	}
	if n == 0 {
		t.Fatal("no state change reached the rule")
	}
}
