package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Interruptions is the EventBridge side of spot interruption handling:
// burst-sizer serve long-polls an SQS queue that an EventBridge rule on
// EC2's events ("EC2 Spot Instance Interruption Warning", "EC2 Instance
// Rebalance Recommendation", "EC2 Instance State-change Notification")
// targets, and acts on the notices of the cluster's instances whose node
// agent did not (internal/notices). Empty QueueURL: off.
type Interruptions struct {
	// QueueURL is the standard queue's URL,
	// https://sqs.<region>.amazonaws.com/<account>/<name>, in the cluster's
	// region (EventBridge delivers a region's EC2 events to a queue of that
	// region). Events from another account or region are refused.
	QueueURL string `yaml:"queue_url"`
	// SQSEndpoint overrides the SQS API endpoint (a VPC endpoint; the EC2
	// emulator, which serves SQS too, in the demo and tests). The queue is
	// still named by QueueURL.
	SQSEndpoint string `yaml:"sqs_endpoint"`
	// AgentWait is how long the sizer leaves a notice to the node's own
	// agent, which announces it to the sizer as soon as IMDS shows it, before
	// acting itself.
	AgentWait Duration `yaml:"agent_wait"`
	// ScheduledPoll is how often the leading burst-sizer asks EC2 for its
	// scheduled events (DescribeInstanceStatus), with or without the
	// queue: a retirement or a reboot is acted on even when no EventBridge
	// rule delivers AWS Health's event. 0 turns the poll off.
	ScheduledPoll Duration `yaml:"scheduled_poll"`
}

// Bounds of interruptions.scheduled_poll (when on).
const (
	MinScheduledPoll = time.Second
	MaxScheduledPoll = time.Hour
)

var (
	sqsHostRe = regexp.MustCompile(`^sqs\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$`)
	sqsPathRe = regexp.MustCompile(`^/(\d{12})/([A-Za-z0-9_-]{1,80})$`)
)

// Queue is the queue QueueURL names.
type Queue struct {
	Region, Account, Name string
}

// ARN is the queue's ARN (what the IAM policy grants).
func (q Queue) ARN(partition string) string {
	if partition == "" {
		partition = "aws"
	}
	return fmt.Sprintf("arn:%s:sqs:%s:%s:%s", partition, q.Region, q.Account, q.Name)
}

// ParseQueueURL reads an SQS queue URL of the form
// https://sqs.<region>.amazonaws.com/<account>/<name>.
func ParseQueueURL(s string) (Queue, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Queue{}, fmt.Errorf("%q is not an https URL such as https://sqs.us-east-1.amazonaws.com/123456789012/burst-interruptions", s)
	}
	h := sqsHostRe.FindStringSubmatch(u.Host)
	if h == nil {
		return Queue{}, fmt.Errorf("host %q is not sqs.<region>.amazonaws.com (write the queue's own URL; a VPC endpoint goes in interruptions.sqs_endpoint)", u.Host)
	}
	p := sqsPathRe.FindStringSubmatch(u.Path)
	if p == nil {
		return Queue{}, fmt.Errorf("path %q is not /<12-digit account>/<queue name>", u.Path)
	}
	return Queue{Region: h[1], Account: p[1], Name: p[2]}, nil
}

// Queue is the configured queue; ok=false when interruptions are off (or
// the URL is invalid, which Validate reports).
func (i Interruptions) Queue() (Queue, bool) {
	if i.QueueURL == "" {
		return Queue{}, false
	}
	q, err := ParseQueueURL(i.QueueURL)
	return q, err == nil
}

func (v *validator) interruptions() {
	in := v.c.Interruptions
	if p := in.ScheduledPoll.Duration; p != 0 && (p < MinScheduledPoll || p > MaxScheduledPoll) {
		v.add("interruptions.scheduled_poll", "%s: poll EC2's scheduled events every %s to %s, or write 0 to turn the poll off", p, MinScheduledPoll, MaxScheduledPoll)
	}
	if in.QueueURL == "" {
		if in.SQSEndpoint != "" {
			v.add("interruptions.sqs_endpoint", "set without interruptions.queue_url: name the queue, or remove the endpoint")
		}
		return
	}
	q, err := ParseQueueURL(in.QueueURL)
	switch {
	case err != nil:
		v.add("interruptions.queue_url", "%v", err)
	case q.Region != v.c.Cluster.Region:
		v.add("interruptions.queue_url", "the queue is in %s, the cluster in %s: EventBridge delivers EC2's events to a queue in their own region", q.Region, v.c.Cluster.Region)
	case strings.HasSuffix(q.Name, ".fifo"):
		v.add("interruptions.queue_url", "a FIFO queue; use a standard queue")
	}
	if e := in.SQSEndpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add("interruptions.sqs_endpoint", "%q is not an http(s) URL", e)
		}
	}
	v.positive("interruptions.agent_wait", in.AgentWait)
	if in.AgentWait.Duration > time.Minute {
		v.add("interruptions.agent_wait", "%s: a spot notice gives 2 minutes; leave the agent at most 1m before the sizer acts", in.AgentWait.Duration)
	}
}
