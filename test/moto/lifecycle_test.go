package moto_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/awssdk"
	"github.com/burst-hpc/burst/internal/capacity"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/cloud"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/lifecycle"
	"github.com/burst-hpc/burst/internal/notices"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// asBurst puts the burst user's access key where the default credential
// chain finds it (the environment), as on a head node configured with
// keys, and keeps the SDK away from instance metadata and ~/.aws.
func asBurst(t *testing.T, a *motoAccount) {
	t.Helper()
	c, err := a.burst.Credentials.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", c.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", c.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func gpuJob(id uint32, nodes string, n uint32) slurm.Job {
	gres, _ := slurm.ParseGRES("gpu:l4:1")
	return slurm.Job{ID: id, Name: "ft", User: "ada", Account: "nlp", Partition: "gpu", State: "CONFIGURING", Nodes: nodes,
		NodeCount: n, CPUs: 4 * n, GRESPerNode: gres, Requeue: true, Comment: "burst: params=1B workload=finetune", TimeLimit: time.Hour}
}

// TestLifecycleOnMoto: burst-resume's Resumer and burst-suspend's Suspender,
// with the EC2 provider the composition root builds from burst.yaml (moto's
// endpoint, the default credential chain holding the burst user's key),
// launch a one-GPU job and a two-node all-or-nothing job on moto's EC2,
// tagged at launch, read the spot price history, release by node tag, hand
// back a two-node job moto can only partly launch (a /28 subnet one address
// short) after terminating the part it launched, and
// burst-sizer's EventBridge reader acts on an EC2 event that moto's
// EventBridge rule delivered to the SQS queue. Every call is made under
// moto's IAM enforcement with burst's policy; calls outside it are denied.
func TestLifecycleOnMoto(t *testing.T) {
	a := newAccount(t)
	asBurst(t, a)
	ctx := context.Background()
	cfg := a.cfg
	cfg.Slurm.SetNodeAddr = true // as the e2e stacks: the node's address from EC2
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prov, err := compose.Cloud(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	local, err := compose.Policy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []slurm.Job{gpuJob(1, "l4-1", 1), gpuJob(2, "l4-[2-3]", 2)}
	sl := slurmfake.New(jobs, nil)
	rec := &lifecycle.JournalRecorder{Dir: cfg.Sizer.StateDir, Log: log}
	resumer := &lifecycle.Resumer{Cfg: cfg, Slurm: sl, Cloud: prov, Recorder: rec, Log: log,
		Breaker: breaker.New(breaker.Options{Dir: cfg.Sizer.StateDir}),
		Ranker:  &lifecycle.FallbackRanker{Local: local, Timeout: time.Second, Log: log},
		UserData: func(nodes []cloud.NodeSpec, issued time.Time) (string, error) {
			return lifecycle.RenderUserData(cfg, nodes, issued)
		}}
	suspender := &lifecycle.Suspender{Cfg: cfg, Cloud: prov, Recorder: rec, Log: log}
	admin := ec2.NewFromConfig(a.admin, at(a.srv.URL))

	resume := func(t *testing.T, job uint32, hostlist string) lifecycle.Outcome {
		t.Helper()
		rf, err := slurm.ParseResumeFile(fmt.Appendf(nil, `{"jobs":[{"job_id":%d,"nodes":%q}],"all_nodes":%q}`, job, hostlist, hostlist))
		if err != nil {
			t.Fatal(err)
		}
		out, err := resumer.Resume(ctx, hostlist, &rf)
		if err != nil {
			t.Fatalf("resume %s: %v", hostlist, err)
		}
		if len(out.Failed) != 0 {
			t.Fatalf("resume %s failed nodes: %v", hostlist, out.Failed)
		}
		return out
	}

	var single cloud.Instance
	t.Run("one GPU job", func(t *testing.T) {
		out := resume(t, 1, "l4-1")
		in, ok := out.Launched["l4-1"]
		if !ok || in.ID == "" || in.JobID != 1 || in.InstanceType != "g6.xlarge" || in.Capacity != capacity.Spot {
			t.Fatalf("outcome %+v: want l4-1 on the cheapest l4 offering, g6.xlarge spot", out)
		}
		single = in
		got := describe(t, admin, in.ID)
		if got.State == nil || got.State.Name != ec2types.InstanceStateNameRunning && got.State.Name != ec2types.InstanceStateNamePending {
			t.Fatalf("moto's instance %s is %v", in.ID, got.State)
		}
		if string(got.InstanceType) != in.InstanceType || aws.ToString(got.ImageId) != cfg.Image.AMI ||
			aws.ToString(got.SubnetId) != cfg.Network.Subnets[in.Zone] {
			t.Fatalf("moto has %s %s in %s, burst says %s in %s", got.InstanceType, aws.ToString(got.ImageId), aws.ToString(got.SubnetId), in.InstanceType, in.Zone)
		}
		if got.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot {
			t.Errorf("instance lifecycle %q, want spot", got.InstanceLifecycle)
		}
		want := map[string]string{ec2p.TagCluster: "demo", ec2p.TagNode: "l4-1", ec2p.TagJobID: "1", ec2p.TagAccount: "nlp",
			ec2p.TagUser: "ada", ec2p.TagClass: "l4", ec2p.TagCapacity: "spot"}
		if tags := tagsOf(got); !subset(want, tags) {
			t.Fatalf("moto's instance carries %v, want at least %v (tags at launch)", tags, want)
		}
		if ups := sl.Updates(); len(ups) == 0 || ups[len(ups)-1].Addr != aws.ToString(got.PrivateIpAddress) {
			t.Errorf("node address updates %+v, want l4-1 at moto's private address %s", ups, aws.ToString(got.PrivateIpAddress))
		}
		// the provider's own view of the cluster agrees with moto's
		live, err := prov.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) != 1 || live[0].ID != in.ID || live[0].Node != "l4-1" {
			t.Fatalf("provider lists %+v", live)
		}
	})

	t.Run("two-node job: one all-or-nothing fleet, each instance named", func(t *testing.T) {
		out := resume(t, 2, "l4-[2-3]")
		a2, a3 := out.Launched["l4-2"], out.Launched["l4-3"]
		if len(out.Launched) != 2 || a2.ID == a3.ID || a2.Zone != a3.Zone || a2.InstanceType != a3.InstanceType || a2.Capacity != a3.Capacity {
			t.Fatalf("outcome %+v: want two instances of one pool", out)
		}
		for node, in := range out.Launched {
			tags := tagsOf(describe(t, admin, in.ID))
			if tags[ec2p.TagNode] != node || tags[ec2p.TagNodes] != "l4-2,l4-3" || tags[ec2p.TagJobID] != "2" || tags[ec2p.TagCluster] != "demo" {
				t.Fatalf("moto's %s (node %s) carries %v", in.ID, node, tags)
			}
		}
	})

	t.Run("spot price history", func(t *testing.T) {
		// moto serves one price for every offered pool: $0.00001 since
		// 2006 (moto/ec2/responses/spot_instances.py)
		p, ok, err := prov.SpotPrice(ctx, "g6.xlarge", "us-east-1a", time.Now())
		if err != nil || !ok || p != 0.00001 {
			t.Fatalf("spot price %v %v %v, want moto's 0.00001", p, ok, err)
		}
		if _, ok, err := prov.SpotPrice(ctx, "g6.xlarge", "us-east-1z", time.Now()); err != nil || ok {
			t.Fatalf("a zone moto does not have: ok=%v err=%v, want no price and no error", ok, err)
		}
	})

	t.Run("scheduled events poll under the printed policy", func(t *testing.T) {
		// DescribeInstanceStatus filtered by event code, as burst-sizer
		// polls it: moto schedules no event, so none comes back, but the
		// call is allowed by iam-policy's statements and moto takes the
		// filter
		evs, err := prov.ScheduledEvents(ctx)
		if err != nil || len(evs) != 0 {
			t.Fatalf("scheduled events %+v, %v; want none and no error", evs, err)
		}
	})

	t.Run("EventBridge rule to SQS to burst-sizer's reader", func(t *testing.T) {
		if single.ID == "" {
			t.Skip("needs the one-GPU job's instance")
		}
		sl.SetNodes(slurm.Node{Name: "l4-1", State: "MIXED", Flags: []string{"NOT_RESPONDING"}})
		sl.SetJobs(slurm.Job{ID: 1, State: "RUNNING", Nodes: "l4-1", StartTime: time.Now().Add(-time.Hour), Requeue: true})
		ops := interruption.SlurmClient{C: sl}
		h, err := interruption.New(ops, interruption.Options{CheckpointRoot: t.TempDir(), By: "sizer"})
		if err != nil {
			t.Fatal(err)
		}
		q, err := notices.NewSQSClient(ctx, awssdk.Options{Region: cfg.Cluster.Region, Endpoint: cfg.Interruptions.SQSEndpoint})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var states []string
		c, err := notices.New(q, prov, &memStore{}, h, ops, notices.Options{QueueURL: cfg.Interruptions.QueueURL,
			Expect: ec2events.Expect{Account: account, Region: region}, AgentWait: 50 * time.Millisecond, Wait: time.Second, Logger: log,
			StateChange: func(_ context.Context, id, state string, _ time.Time) error {
				mu.Lock()
				defer mu.Unlock()
				states = append(states, id+" "+state)
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		eb := eventbridge.NewFromConfig(a.admin, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(a.srv.URL) })
		arn := "arn:aws:ec2:" + region + ":" + account + ":instance/" + single.ID
		put, err := eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{
			{Source: aws.String("aws.ec2"), DetailType: aws.String(ec2events.DetailStateChange), Resources: []string{arn},
				Detail: aws.String(fmt.Sprintf(`{"instance-id":%q,"state":"running"}`, single.ID))},
			{Source: aws.String("aws.ec2"), DetailType: aws.String(ec2events.DetailSpotInterruption), Resources: []string{arn},
				Detail: aws.String(fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate"}`, single.ID))},
		}})
		if err != nil || put.FailedEntryCount != 0 {
			t.Fatalf("putting EC2 events: %v %+v", err, put)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Run(runCtx) }()
		waitFor(t, "the job requeued and the state change recorded", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(sl.Calls(), "requeue 1") && slices.Contains(states, single.ID+" running")
		})
		adminQ := sqs.NewFromConfig(a.admin, func(o *sqs.Options) { o.BaseEndpoint = aws.String(a.srv.URL) })
		waitFor(t, "the queue emptied (both messages deleted)", func() bool {
			at, err := adminQ.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(a.queueURL),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
			return err == nil && at.Attributes["ApproximateNumberOfMessages"] == "0" && at.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
		})
		cancel()
		<-done
	})

	t.Run("release: terminate by node tag", func(t *testing.T) {
		gone, err := suspender.Suspend(ctx, "l4-[1-3]")
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, in := range gone {
			nodes = append(nodes, in.Node)
			if s := describe(t, admin, in.ID).State; s == nil || s.Name != ec2types.InstanceStateNameShuttingDown && s.Name != ec2types.InstanceStateNameTerminated {
				t.Errorf("moto's %s (node %s) is %v after release", in.ID, in.Node, s)
			}
		}
		sort.Strings(nodes)
		if strings.Join(nodes, ",") != "l4-1,l4-2,l4-3" {
			t.Fatalf("released %v, want l4-1,l4-2,l4-3", nodes)
		}
		live, err := prov.List(ctx)
		if err != nil || len(live) != 0 {
			t.Fatalf("live after release: %+v %v", live, err)
		}
	})

	t.Run("all-or-nothing: a job moto launches only part of is handed back, the part terminated by its tags", func(t *testing.T) {
		// moto has no capacity model, but it has address space: a /28
		// leaves 11 addresses (moto/ec2/models/subnets.py: the CIDR's
		// hosts, less three AWS reserves), and moto raises an internal
		// error (StopIteration, HTTP 500) on the instance that finds none,
		// after launching those before it. Ten taken by someone else leave
		// one: a two-node fleet launches one instance and fails.
		vpcs, err := admin.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{{Name: aws.String("is-default"), Values: []string{"true"}}}})
		if err != nil || len(vpcs.Vpcs) != 1 {
			t.Fatalf("describing moto's default VPC: %v", err)
		}
		tiny, err := admin.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpcs.Vpcs[0].VpcId, CidrBlock: aws.String("172.31.250.0/28"), AvailabilityZone: aws.String("us-east-1a")})
		if err != nil {
			t.Fatalf("creating a /28 subnet: %v", err)
		}
		subnet := aws.ToString(tiny.Subnet.SubnetId)
		if _, err := admin.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(cfg.Image.AMI), InstanceType: ec2types.InstanceTypeT3Micro,
			MinCount: aws.Int32(10), MaxCount: aws.Int32(10), SubnetId: aws.String(subnet)}); err != nil {
			t.Fatalf("filling the /28 with ten instances: %v", err)
		}
		// burst.yaml with the small subnet as its only one
		small := *cfg
		small.Network.Subnets = map[string]string{"us-east-1a": subnet}
		small.Sizer.StateDir = t.TempDir()
		rec := newRecorder(t, a.srv.URL) // burst's EC2 calls, through a recording proxy to moto
		small.Cluster.EC2Endpoint = rec.URL
		prov, err := compose.Cloud(ctx, &small, log)
		if err != nil {
			t.Fatal(err)
		}
		sl := slurmfake.New([]slurm.Job{gpuJob(3, "l4-[1-2]", 2)}, nil)
		r := &lifecycle.Resumer{Cfg: &small, Slurm: sl, Cloud: prov, Log: log,
			Breaker: breaker.New(breaker.Options{Dir: small.Sizer.StateDir}),
			Ranker:  &lifecycle.FallbackRanker{Local: local, Timeout: time.Second, Log: log},
			UserData: func(nodes []cloud.NodeSpec, issued time.Time) (string, error) {
				return lifecycle.RenderUserData(&small, nodes, issued)
			}}
		rf, err := slurm.ParseResumeFile([]byte(`{"jobs":[{"job_id":3,"nodes":"l4-[1-2]"}],"all_nodes":"l4-[1-2]"}`))
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Resume(ctx, "l4-[1-2]", &rf)
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		if len(out.Launched) != 0 || out.Failed["l4-1"] == "" || out.Failed["l4-2"] == "" {
			t.Fatalf("outcome %+v: want no node launched and both failed with a reason", out)
		}
		// Slurm got both nodes back, with the reason, at once
		var handed []string
		for _, u := range sl.Updates() {
			if u.State == "POWER_DOWN_FORCE" {
				if !strings.HasPrefix(u.Reason, "burst: ") {
					t.Errorf("nodes %v handed back with reason %q, want burst's", u.Names, u.Reason)
				}
				handed = append(handed, u.Names...)
			}
		}
		sort.Strings(handed)
		if strings.Join(handed, ",") != "l4-1,l4-2" {
			t.Fatalf("node updates %+v: want l4-1 and l4-2 powered down with a reason", sl.Updates())
		}
		// moto launched part of the fleet, in the subnet of burst's
		// override (not the zone's default subnet)
		all, err := admin.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("tag:" + ec2p.TagJobID), Values: []string{"3"}}}})
		if err != nil {
			t.Fatal(err)
		}
		var made []ec2types.Instance
		for _, res := range all.Reservations {
			made = append(made, res.Instances...)
		}
		if len(made) != 1 {
			t.Fatalf("moto made %d instances of job 3, want the 1 of 2 that the /28's last address allowed", len(made))
		}
		partial := made[0]
		id := aws.ToString(partial.InstanceId)
		if aws.ToString(partial.SubnetId) != subnet || tagsOf(partial)[ec2p.TagNodes] != "l4-1,l4-2" {
			t.Fatalf("moto launched %s in %s tagged %v, want the override's subnet %s and the fleet's node list", id, aws.ToString(partial.SubnetId), tagsOf(partial), subnet)
		}
		// burst found it by its launch tags and asked EC2 to terminate it
		asked := false
		for _, c := range rec.Calls("TerminateInstances") {
			asked = asked || slices.Equal(c.InstanceIDs(), []string{id})
		}
		if !asked {
			t.Fatalf("burst's TerminateInstances calls %+v: want the partial fleet's %s terminated", rec.Calls("TerminateInstances"), id)
		}
		if s := describe(t, admin, id).State; s != nil && (s.Name == ec2types.InstanceStateNameShuttingDown || s.Name == ec2types.InstanceStateNameTerminated) {
			return // what AWS does
		}
		// moto 5.2.1 cannot terminate it: the instance names the fleet its
		// failed CreateFleet never registered, and Instance.terminate
		// (moto/ec2/models/instances.py) reads that fleet's launch_specs
		// from None (AttributeError, HTTP 500), for burst and for anyone.
		// Shown here, so that a moto that terminates it makes this test
		// demand the termination instead.
		for _, c := range rec.Calls("TerminateInstances") {
			if slices.Equal(c.InstanceIDs(), []string{id}) && c.Status != http.StatusInternalServerError {
				t.Fatalf("moto answered burst's termination of %s with %d, yet it still runs", id, c.Status)
			}
		}
		_, err = admin.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
		var re *awshttp.ResponseError
		if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusInternalServerError {
			t.Fatalf("%s still runs after burst's termination, and moto answers the admin's with %v: want moto's 500", id, err)
		}
		t.Logf("moto cannot terminate %s (its fleet was never registered); burst asked to, with the node list and job tags it found it by", id)
	})

	t.Run("outside the policy: denied", func(t *testing.T) {
		bec2 := ec2.NewFromConfig(a.burst, at(a.srv.URL))
		bsqs := sqs.NewFromConfig(a.burst, func(o *sqs.Options) { o.BaseEndpoint = aws.String(a.srv.URL) })
		adminQ := sqs.NewFromConfig(a.admin, func(o *sqs.Options) { o.BaseEndpoint = aws.String(a.srv.URL) })
		other, err := adminQ.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("someone-elses-queue")})
		if err != nil {
			t.Fatal(err)
		}
		calls := map[string]error{}
		_, calls["ec2:DescribeImages"] = bec2.DescribeImages(ctx, &ec2.DescribeImagesInput{})
		_, calls["ec2:StopInstances"] = bec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{single.ID}})
		_, calls["ec2:DescribeSubnets"] = bec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
		_, calls["sqs:SendMessage"] = bsqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(a.queueURL), MessageBody: aws.String("{}")})
		_, calls["sqs:PurgeQueue"] = bsqs.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(a.queueURL)})
		_, calls["sqs:ReceiveMessage on another queue"] = bsqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: other.QueueUrl})
		for call, err := range calls {
			var ae smithy.APIError
			var re *awshttp.ResponseError
			switch {
			case errors.As(err, &ae) && (ae.ErrorCode() == "UnauthorizedOperation" || strings.Contains(ae.ErrorCode(), "AccessDenied")):
			// moto answers an SQS call IAM denies with 403 and an XML body
			// (the query protocol's), which the SDK's JSON protocol cannot
			// decode; AWS answers JSON (AccessDeniedException)
			case strings.HasPrefix(call, "sqs:") && errors.As(err, &re) && re.HTTPStatusCode() == http.StatusForbidden:
			default:
				t.Errorf("%s as the burst user: %v, want an access denial", call, err)
			}
		}
	})
}

func describe(t *testing.T, c *ec2.Client, id string) ec2types.Instance {
	t.Helper()
	out, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("describing %s on moto: %v", id, err)
	}
	return out.Reservations[0].Instances[0]
}

func tagsOf(in ec2types.Instance) map[string]string {
	m := map[string]string{}
	for _, tg := range in.Tags {
		m[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	return m
}

func subset(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(2 * time.Minute) // a hang guard, not a performance bound
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// memStore is the sizer's interruption store in memory: no agent
// announced anything.
type memStore struct {
	mu  sync.Mutex
	ins []sizerapi.Interruption
}

func (m *memStore) Interruptions(context.Context, time.Time) ([]sizerapi.Interruption, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]sizerapi.Interruption(nil), m.ins...), nil
}

func (m *memStore) AddInterruption(_ context.Context, in sizerapi.Interruption) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ins = append(m.ins, in)
	return nil
}
