package config

import (
	"strings"
	"testing"
	"time"
)

func TestInterruptionsQueue(t *testing.T) {
	cfg, err := Load("../../examples/burst.yaml")
	if err != nil {
		t.Fatal(err)
	}
	q, ok := cfg.Interruptions.Queue()
	if !ok || q.ARN("") != "arn:aws:sqs:us-east-1:123456789012:burst-ml-prod-interruptions" || cfg.Interruptions.AgentWait.Duration != 10*time.Second {
		t.Fatalf("example queue %+v %v, agent_wait %v", q, ok, cfg.Interruptions.AgentWait)
	}
	for _, c := range []struct {
		yaml, path, want string
	}{
		{"queue_url: http://sqs.us-east-1.amazonaws.com/123456789012/q", "interruptions.queue_url", "https URL"},
		{"queue_url: https://example.com/123456789012/q", "interruptions.queue_url", "sqs.<region>.amazonaws.com"},
		{"queue_url: https://sqs.us-east-1.amazonaws.com/1234/q", "interruptions.queue_url", "12-digit account"},
		{"queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/a/b", "interruptions.queue_url", "queue name"},
		{"queue_url: https://sqs.eu-west-1.amazonaws.com/123456789012/q", "interruptions.queue_url", "in their own region"},
		{"queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/q\n  sqs_endpoint: ftp://x", "interruptions.sqs_endpoint", "http(s) URL"},
		{"queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/q\n  agent_wait: 5m", "interruptions.agent_wait", "at most 1m"},
		{"queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/q\n  agent_wait: 0s", "interruptions.agent_wait", "positive"},
		{"sqs_endpoint: http://127.0.0.1:1", "interruptions.sqs_endpoint", "without interruptions.queue_url"},
		{"queue: x", "interruptions.queue", "unknown key"},
	} {
		y := "cluster:\n  name: t\n  region: us-east-1\nclasses:\n  - name: a\n    gpu_model: a10g\n    gpus_per_node: 1\n    max_nodes: 1\n    instance_types: [g5.xlarge]\n" +
			"network:\n  subnets:\n    us-east-1a: subnet-1\nimage:\n  ami: ami-1\ninterruptions:\n  " + c.yaml + "\n"
		cfg, err := Parse([]byte(y), "t.yaml")
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %s: ...%s", c.yaml, err, c.path, c.want)
		}
	}
}
