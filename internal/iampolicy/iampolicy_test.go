package iampolicy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	cloudec2 "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/iampolicy"
	"github.com/burst-hpc/burst/internal/iampolicy/iampolicytest"
	"github.com/burst-hpc/burst/internal/notices"
	"github.com/burst-hpc/burst/test/ec2emu"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestPolicyCoversExactlyRecordedActions runs every provider operation and
// burst-sizer's interruption-queue reader against the emulator and checks
// the policy against what was called, service by service.
func TestPolicyCoversExactlyRecordedActions(t *testing.T) {
	srv := ec2emu.New(ec2emu.Options{TimeScale: 1000})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	client := ec2.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 10 * time.Millisecond; o.RateLimiter = ratelimit.None })
		}}, func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL()) })
	p, err := cloudec2.New(client, cloudec2.Options{Cluster: "prod", ImageID: "ami-0abc", InstanceProfile: "burst-node",
		Subnets: map[string]string{"us-east-1a": "subnet-a", "us-east-1b": "subnet-b"}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv.SetCapacity("g5.xlarge", "us-east-1a", "spot", 0)
	offs := []cloud.Offering{{InstanceType: "g5.xlarge", Zone: "us-east-1a", Capacity: capacity.Spot}, {InstanceType: "g5.xlarge", Zone: "us-east-1b", Capacity: capacity.Spot}}
	steps := []func() error{
		func() error {
			_, err := p.Launch(ctx, cloud.LaunchRequest{Nodes: []cloud.NodeSpec{{Node: "gpu-1", JobID: 1}}, Offerings: offs, OnDemandFallback: true})
			return err
		},
		func() error {
			_, err := p.Launch(ctx, cloud.LaunchRequest{Nodes: []cloud.NodeSpec{{Node: "gpu-2", JobID: 2}, {Node: "gpu-3", JobID: 2}}, Offerings: offs, AllOrNothing: true})
			return err
		},
		func() error {
			// two p5.48xlarge nodes: DescribeInstanceTypes for their network
			// cards, the EFA launch template, the cluster placement group
			_, err := p.Launch(ctx, cloud.LaunchRequest{Nodes: []cloud.NodeSpec{{Node: "p5-1", JobID: 5}, {Node: "p5-2", JobID: 5}}, AllOrNothing: true,
				Offerings: []cloud.Offering{{InstanceType: "p5.48xlarge", Zone: "us-east-1a", Capacity: capacity.OnDemand}}})
			return err
		},
		func() error {
			// into a capacity reservation: RunInstances, after describing it
			cr := srv.AddCapacityReservation(ec2emu.CapacityReservationSpec{InstanceType: "g5.xlarge", Zone: "us-east-1b", Count: 1, Match: "targeted"})
			if _, err := p.Reservations(ctx, []string{cr}); err != nil {
				return err
			}
			_, err := p.Launch(ctx, cloud.LaunchRequest{Nodes: []cloud.NodeSpec{{Node: "gpu-4", JobID: 4}},
				Offerings: []cloud.Offering{{InstanceType: "g5.xlarge", Zone: "us-east-1b", Capacity: capacity.Reserved, Reservation: cr}}})
			return err
		},
		func() error {
			// into a Capacity Block: the same RunInstances (MarketType
			// capacity-block), after describing it; no new action
			now := srv.Now()
			cb, err := srv.AddCapacityBlock(ec2emu.CapacityBlockSpec{InstanceType: "g5.xlarge", Zone: "us-east-1b", Count: 1, Start: now.Add(-time.Minute), End: now.Add(24 * time.Hour)})
			if err != nil {
				return err
			}
			rs, err := p.Reservations(ctx, []string{cb})
			if err != nil || len(rs) != 1 {
				return fmt.Errorf("describing the block: %v %v", rs, err)
			}
			_, err = p.Launch(ctx, cloud.LaunchRequest{Nodes: []cloud.NodeSpec{{Node: "gpu-5", JobID: 5}},
				Offerings: []cloud.Offering{{InstanceType: "g5.xlarge", Zone: "us-east-1b", Capacity: capacity.Reserved, Reservation: cb, BlockEnd: rs[0].End}}})
			return err
		},
		func() error { _, err := p.List(ctx); return err },
		// burst-sizer's poll of EC2's scheduled events
		func() error { _, err := p.ScheduledEvents(ctx); return err },
		func() error { _, err := p.ListAll(ctx); return err },
		func() error { _, _, err := p.SpotPrice(ctx, "g5.xlarge", "us-east-1b", time.Now()); return err },
		func() error { _, err := p.Terminate(ctx, []string{"gpu-1"}); return err },
		func() error { _, err := p.TerminateIDs(ctx, []string{"i-0000000000000dead"}); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	queueARN := readInterruptionQueue(t, srv, p)
	recorded := srv.IAMActions()
	want := append(append([]string(nil), iampolicy.Actions...), iampolicy.SQSActions...)
	sort.Strings(want)
	if !slices.Equal(recorded, want) {
		t.Errorf("burst called %v\niampolicy.Actions + SQSActions = %v", recorded, want)
	}
	if !slices.Equal(iampolicy.SQSActions, notices.Actions) {
		t.Errorf("iampolicy.SQSActions %v, the reader's own list %v", iampolicy.SQSActions, notices.Actions)
	}
	policy, err := iampolicy.Render("burst:cluster", "prod", iampolicy.Options{Region: "us-east-1", PassRoleARN: "arn:aws:iam::123456789012:role/burst-node",
		InterruptionQueueARN: queueARN})
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := iampolicytest.ActionsIn(policy)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]string(nil), recorded...)
	for a := range iampolicy.Implied {
		want = append(want, a)
	}
	sort.Strings(want)
	want = slices.Compact(want) // CreateTags: called (fleet naming) and implied (launch tags)
	if !slices.Equal(allowed, want) {
		t.Errorf("policy allows %v\nwant recorded + implied %v", allowed, want)
	}
	// Mutating actions are scoped by the cluster tag.
	var doc iampolicy.Document
	if err := json.Unmarshal(policy, &doc); err != nil {
		t.Fatal(err)
	}
	for _, s := range doc.Statement {
		if strings.HasPrefix(s.Action[0], "sqs:") {
			if !slices.Equal(s.Resource, []string{queueARN}) || len(s.Condition) != 0 {
				t.Errorf("statement %s (%v) is not on exactly the interruption queue: %v", s.Sid, s.Action, s.Resource)
			}
			continue
		}
		mutating := !strings.HasPrefix(s.Action[0], "ec2:Describe") && s.Action[0] != "iam:PassRole" && s.Sid != "BurstLaunchSupportingResources"
		cond, _ := json.Marshal(s.Condition)
		if mutating && !strings.Contains(string(cond), "Tag/burst:cluster\":\"prod\"") {
			t.Errorf("statement %s (%v) is not scoped by the cluster tag: %s", s.Sid, s.Action, cond)
		}
		if s.Sid == "BurstLaunchSupportingResources" && slices.ContainsFunc(s.Resource, func(r string) bool { return strings.Contains(r, ":instance/") }) {
			t.Errorf("instances may be launched without the cluster tag: %v", s.Resource)
		}
	}
	golden := "testdata/policy.golden.json"
	if *update {
		if err := os.WriteFile(golden, policy, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(g, policy) {
		t.Errorf("policy differs from %s; run go test ./internal/iampolicy -update and review the diff", golden)
	}
}

// TestNodePolicy: the node role reads the one munge secret and nothing
// else; no EC2 action at all.
func TestNodePolicy(t *testing.T) {
	arn := "arn:aws:secretsmanager:us-east-1:123456789012:secret:burst/munge-AbCdEf"
	b, err := iampolicy.RenderNode(arn, iampolicy.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	acts, err := iampolicytest.ActionsIn(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(acts, []string{"secretsmanager:GetSecretValue"}) {
		t.Errorf("node policy allows %v", acts)
	}
	var doc iampolicy.Document
	json.Unmarshal(b, &doc)
	if len(doc.Statement) != 1 || !slices.Equal(doc.Statement[0].Resource, []string{arn}) {
		t.Errorf("node policy statements %+v", doc.Statement)
	}
	if _, err := iampolicy.RenderNode("file:///etc/munge/munge.key", iampolicy.NodeOptions{}); err == nil {
		t.Error("a node policy for a munge key file")
	}
	if _, err := iampolicy.RenderNode("arn:aws:secretsmanager:us-east-1:123456789012:secret:*", iampolicy.NodeOptions{}); err == nil {
		t.Error("a node policy with a wildcard secret")
	}
	k, err := iampolicy.RenderNode(arn, iampolicy.NodeOptions{KMSKeyARN: "arn:aws:kms:us-east-1:123456789012:key/1234"})
	if err != nil || !strings.Contains(string(k), `"kms:ViaService": "secretsmanager.us-east-1.amazonaws.com"`) {
		t.Errorf("with a KMS key: %s %v", k, err)
	}
}

func TestRenderRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		key, name string
		opts      iampolicy.Options
		want      string
	}{
		{"", "prod", iampolicy.Options{}, "cluster tag key"},
		{"aws:cluster", "prod", iampolicy.Options{}, "cluster tag key"},
		{"burst:cluster", "", iampolicy.Options{}, "cluster name"},
		{"burst:cluster", "prod", iampolicy.Options{Region: "useast1"}, "region"},
		{"burst:cluster", "prod", iampolicy.Options{Account: "12"}, "account"},
		{"burst:cluster", "prod", iampolicy.Options{PassRoleARN: "role/x"}, "pass-role"},
		{"burst:cluster", "prod", iampolicy.Options{InterruptionQueueARN: "arn:aws:sqs:us-east-1:123456789012:*"}, "interruption queue"},
		{"burst:cluster", "prod", iampolicy.Options{Region: "us-east-1", InterruptionQueueARN: "arn:aws:sqs:eu-west-1:123456789012:q"}, "not in region"},
		{"burst:cluster", "prod", iampolicy.Options{Account: "123456789012", InterruptionQueueARN: "arn:aws:sqs:us-east-1:210987654321:q"}, "not in account"},
	} {
		if _, err := iampolicy.Render(c.key, c.name, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Render(%q, %q, %+v) err = %v, want one naming %s", c.key, c.name, c.opts, err, c.want)
		}
	}
}
