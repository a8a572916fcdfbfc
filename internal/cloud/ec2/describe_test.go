package ec2

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// describeAfterFleet is the real SDK client on the emulator, except that
// every DescribeInstances after a successful CreateFleet fails as throttled
// (failing > 0: only that many of them) past the SDK's own retries: the
// follow-up describe of a launch that worked.
type describeAfterFleet struct {
	EC2API
	mu       sync.Mutex
	launched bool
	failing  int // 0: fail them all
	failed   int
}

func (d *describeAfterFleet) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, o ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	out, err := d.EC2API.CreateFleet(ctx, in, o...)
	if err == nil && len(out.Instances) > 0 {
		d.mu.Lock()
		d.launched = true
		d.mu.Unlock()
	}
	return out, err
}

func (d *describeAfterFleet) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, o ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	d.mu.Lock()
	fail := d.launched && (d.failing == 0 || d.failed < d.failing)
	if fail {
		d.failed++
	}
	d.mu.Unlock()
	if fail {
		return nil, &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}
	}
	return d.EC2API.DescribeInstances(ctx, in, o...)
}

// TestLaunchSurvivesThrottledDescribe: a CreateFleet that launched is never
// undone because the DescribeInstances after it stays throttled: the nodes
// get the instances from CreateFleet's answer (marked Unconfirmed), nothing
// is terminated, and a repeated launch reuses them (no duplicate). The
// TestFaultThrottlingStorm flake on 24.11 was exactly this: "launched 0",
// the node handed back while its job already ran.
func TestLaunchSurvivesThrottledDescribe(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		aon   bool
	}{{"one node", []string{"gpu-1"}, false}, {"three nodes all-or-nothing", []string{"gpu-1", "gpu-2", "gpu-3"}, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, ec2emu.Options{}, Options{})
			api := &describeAfterFleet{EC2API: e.client}
			p, err := New(api, Options{Cluster: "test", Subnets: testSubnets, LaunchTemplateName: e.lt, StateDir: t.TempDir(),
				DescribeBudget: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			req := cloud.LaunchRequest{Nodes: nodes(7, tc.nodes...), AllOrNothing: tc.aon, Attempt: 1,
				Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1b")}}
			res, err := p.Launch(ctx(t), req)
			if err != nil || len(res.Failed) != 0 {
				t.Fatalf("launch: err %v, failed %v; want the launched instances", err, res.Failed)
			}
			if api.failed == 0 {
				t.Fatal("no describe was throttled; the test tested nothing")
			}
			if len(res.Instances) != len(tc.nodes) {
				t.Fatalf("got %d instances, want %d", len(res.Instances), len(tc.nodes))
			}
			seen := map[string]bool{}
			for _, in := range res.Instances {
				if !in.Unconfirmed || in.ID == "" || in.InstanceType != "g5.xlarge" || in.Zone != "us-east-1b" || in.Capacity != capacity.Spot || in.JobID != 7 {
					t.Errorf("instance %+v: want an unconfirmed g5.xlarge spot instance in us-east-1b for job 7", in)
				}
				seen[in.Node] = true
			}
			for _, n := range tc.nodes {
				if !seen[n] {
					t.Errorf("node %s got no instance: %+v", n, res.Instances)
				}
			}
			if n := len(e.srv.Live()); n != len(tc.nodes) {
				t.Errorf("%d live instances in EC2, want %d (none terminated)", n, len(tc.nodes))
			}
			if n := len(callsOf(e.srv, "TerminateInstances")); n != 0 {
				t.Errorf("%d TerminateInstances calls, want none", n)
			}
			// the throttling lifts; Slurm (or an admin) resumes the nodes again
			api.mu.Lock()
			api.launched = false
			api.mu.Unlock()
			res, err = p.Launch(ctx(t), req)
			if err != nil || len(res.Reused) != len(tc.nodes) {
				t.Fatalf("repeated launch: err %v, reused %v; want every node's instance reused", err, res.Reused)
			}
			if n := len(e.srv.Instances()); n != len(tc.nodes) {
				t.Errorf("%d instances after the repeat, want %d (no duplicate)", n, len(tc.nodes))
			}
		})
	}
}

// TestLaunchRetriesThrottledDescribe: a describe throttled a few times past
// the SDK's retries is retried by the provider within its budget, and the
// instances come back confirmed (with their addresses).
func TestLaunchRetriesThrottledDescribe(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	api := &describeAfterFleet{EC2API: e.client, failing: 3}
	p, err := New(api, Options{Cluster: "test", Subnets: testSubnets, LaunchTemplateName: e.lt, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(7, "gpu-1", "gpu-2"), AllOrNothing: true,
		Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")}})
	if err != nil || len(res.Instances) != 2 {
		t.Fatalf("launch: err %v, %d instances", err, len(res.Instances))
	}
	if api.failed != 3 {
		t.Errorf("%d describes throttled, want the 3 injected", api.failed)
	}
	for _, in := range res.Instances {
		if in.Unconfirmed || in.PrivateIP == "" {
			t.Errorf("instance %+v: want it confirmed by a describe, with its address", in)
		}
	}
}

// TestLoneNodeOfAFleetIsFound: a later call of a partial resume asks for
// one node of a job launched whole; its instance carries the fleet's node
// list, not a node tag of its own, and is found by the job.
func TestLoneNodeOfAFleetIsFound(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	offs := []cloud.Offering{spot("g5.xlarge", "us-east-1a")}
	first, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(9, "gpu-1", "gpu-2", "gpu-3"), AllOrNothing: true, Attempt: 1, Offerings: offs})
	if err != nil || len(first.Instances) != 3 {
		t.Fatalf("launch: err %v, %d instances", err, len(first.Instances))
	}
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(9, "gpu-2"), AllOrNothing: true, Attempt: 1, Offerings: offs})
	if err != nil || len(res.Reused) != 1 || len(res.Instances) != 1 {
		t.Fatalf("lone node: err %v, reused %v, instances %+v; want gpu-2's instance reused", err, res.Reused, res.Instances)
	}
	for _, in := range first.Instances {
		if in.Node == "gpu-2" && in.ID != res.Instances[0].ID {
			t.Errorf("gpu-2 got %s, its instance is %s", res.Instances[0].ID, in.ID)
		}
	}
	if n := len(e.srv.Instances()); n != 3 {
		t.Errorf("%d instances, want 3 (no duplicate)", n)
	}
}
