package ec2

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/imds"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// imdsGet reads an instance's metadata from the emulator through burst's
// own IMDS client.
func imdsGet(t *testing.T, url, path string) (string, error) {
	t.Helper()
	b, ok, err := imds.New(imds.Options{Endpoint: url, Timeout: 5 * time.Second}).Get(context.Background(), path)
	if err == nil && !ok {
		err = fmt.Errorf("%s: not found", path)
	}
	return string(b), err
}

// Under capacity-optimized-prioritized one spot fleet carries every ranked
// offering with its rank as priority.
func TestSpotLaunchRankedOverrides(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	offs := []cloud.Offering{spot("g6.xlarge", "us-east-1b"), spot("g5.xlarge", "us-east-1a"), spot("g4dn.xlarge", "us-east-1c")}
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Cluster: "test", Nodes: nodes(42, "gpu-1"), Offerings: offs, Attempt: 1,
		SpotAllocationStrategy: capacity.CapacityOptimizedPrioritized})
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	if len(res.Instances) != 1 {
		t.Fatalf("got %d instances, want 1", len(res.Instances))
	}
	in := res.Instances[0]
	if in.InstanceType != "g6.xlarge" || in.Zone != "us-east-1b" || in.Capacity != capacity.Spot || in.Node != "gpu-1" || in.JobID != 42 || in.PrivateIP == "" || in.LaunchTime.IsZero() {
		t.Errorf("instance = %+v, want the first-ranked spot offering g6.xlarge in us-east-1b for gpu-1 job 42 with an IP", in)
	}
	calls := callsOf(e.srv, "CreateFleet")
	if len(calls) != 1 {
		t.Fatalf("%d CreateFleet calls, want 1", len(calls))
	}
	p := calls[0].Params
	for i, o := range offs {
		pre := "LaunchTemplateConfigs.1.Overrides." + string(rune('1'+i)) + "."
		if p.Get(pre+"InstanceType") != o.InstanceType || p.Get(pre+"SubnetId") != testSubnets[o.Zone] || p.Get(pre+"Priority") != []string{"0", "1", "2"}[i] {
			t.Errorf("override %d = %s %s priority %s, want %s %s priority %d", i+1, p.Get(pre+"InstanceType"), p.Get(pre+"SubnetId"), p.Get(pre+"Priority"), o.InstanceType, testSubnets[o.Zone], i)
		}
	}
	for k, want := range map[string]string{
		"Type": "instant", "SpotOptions.AllocationStrategy": "capacity-optimized-prioritized",
		"TargetCapacitySpecification.DefaultTargetCapacityType": "spot", "TargetCapacitySpecification.TotalTargetCapacity": "1",
	} {
		if got := p.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// A single node is tagged at launch, and never afterwards.
	for k, want := range map[string]string{TagCluster: "test", TagNode: "gpu-1", TagJobID: "42", TagAccount: "physics", TagUser: "alice", TagClass: "train", TagCapacity: "spot"} {
		if in.Tags[k] != want {
			t.Errorf("tag %s = %q, want %q", k, in.Tags[k], want)
		}
	}
	if n := e.srv.CallCount("CreateTags"); n != 0 {
		t.Errorf("%d CreateTags calls; a single node is tagged at launch only", n)
	}

	// The node learns who it is from IMDS.
	url, err := e.srv.IMDSURL(in.ID)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"tags/instance/" + TagNode: "gpu-1", "instance-life-cycle": "spot", "instance-id": in.ID, "local-ipv4": in.PrivateIP} {
		got, err := imdsGet(t, url, path)
		if err != nil || got != want {
			t.Errorf("IMDS %s = %q, %v; want %q", path, got, err, want)
		}
	}
}

func callsOf(srv *ec2emu.Server, action string) []ec2emu.Call {
	var out []ec2emu.Call
	for _, c := range srv.Calls() {
		if c.Action == action {
			out = append(out, c)
		}
	}
	return out
}

func TestFallbackToNextOfferingAndOnDemand(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, ec2emu.Options{}, Options{StateDir: dir})
	e.srv.SetCapacity("g5.xlarge", "us-east-1a", "spot", 0)
	offs := []cloud.Offering{spot("g5.xlarge", "us-east-1a"), spot("g6.xlarge", "us-east-1a")}
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1"), Offerings: offs, OnDemandFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Instances[0]; got.InstanceType != "g6.xlarge" || got.Capacity != capacity.Spot {
		t.Fatalf("got %s %s, want the next offering g6.xlarge spot", got.InstanceType, got.Capacity)
	}
	// Every spot pool dry: on-demand fallback, in rank order.
	e.srv.SetCapacity("g6.xlarge", "us-east-1a", "spot", 0)
	e.srv.ResetCalls()
	res, err = e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(2, "gpu-2"), Offerings: offs, OnDemandFallback: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Instances[0]; got.InstanceType != "g5.xlarge" || got.Capacity != capacity.OnDemand || got.Tags[TagCapacity] != "on-demand" {
		t.Fatalf("got %s %s, want on-demand g5.xlarge", got.InstanceType, got.Capacity)
	}
	// g5.xlarge spot was cached as unavailable: the spot fleet offered only g6.xlarge.
	fleets := callsOf(e.srv, "CreateFleet")
	if len(fleets) != 2 {
		t.Fatalf("%d CreateFleet calls, want spot then on-demand", len(fleets))
	}
	if p := fleets[0].Params; p.Get("LaunchTemplateConfigs.1.Overrides.1.InstanceType") != "g6.xlarge" || p.Has("LaunchTemplateConfigs.1.Overrides.2.InstanceType") {
		t.Errorf("spot fleet overrides = %v, want only g6.xlarge (g5.xlarge cached unavailable)", p)
	}
	// The cache outlives the provider (a new resume process).
	p2, err := New(e.client, Options{Cluster: "test", Subnets: testSubnets, LaunchTemplateName: e.lt, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p2.Cache().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"g5.xlarge/us-east-1a/spot", "g6.xlarge/us-east-1a/spot"} {
		if snap[k] != "InsufficientInstanceCapacity" {
			t.Errorf("cache[%s] = %q, want InsufficientInstanceCapacity; cache %v", k, snap[k], snap)
		}
	}
	// The dashboard's view of the same cache: the pools, their code and end.
	pools, err := NewUnavailableCache(dir, time.Hour, time.Now).Pools()
	if err != nil || len(pools) != len(snap) {
		t.Fatalf("Pools() = %+v, %v; want the %d pools of %v", pools, err, len(snap), snap)
	}
	for _, pl := range pools {
		if snap[pl.InstanceType+"/"+pl.Zone+"/"+pl.Capacity] != pl.Code || !pl.Until.After(time.Now()) {
			t.Errorf("pool %+v does not match the cache %v", pl, snap)
		}
	}
	// Without fallback and with every pool cached dry the error names them.
	_, err = p2.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(3, "gpu-3"), Offerings: offs})
	if !errors.Is(err, cloud.ErrInsufficientCapacity) {
		t.Fatalf("err = %v, want insufficient capacity", err)
	}
	if r := cloud.Reason(err); r != "burst: InsufficientInstanceCapacity for g5.xlarge,g6.xlarge spot in us-east-1a" {
		t.Errorf("reason = %q", r)
	}
}

func TestAllOrNothing(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	for _, z := range []string{"us-east-1a", "us-east-1b"} {
		e.srv.SetCapacity("p4d.24xlarge", z, "spot", 3)
		e.srv.SetCapacity("p4d.24xlarge", z, "on-demand", 0)
	}
	req := cloud.LaunchRequest{Nodes: nodes(7, "gpu-1", "gpu-2", "gpu-3", "gpu-4"), AllOrNothing: true, PlacementGroup: "burst-pg", OnDemandFallback: true,
		Offerings: []cloud.Offering{spot("p4d.24xlarge", "us-east-1a"), spot("p4d.24xlarge", "us-east-1b")}}
	res, err := e.prov.Launch(ctx(t), req)
	if !errors.Is(err, cloud.ErrInsufficientCapacity) {
		t.Fatalf("err = %v, want insufficient capacity when only 3 of 4 can be had", err)
	}
	if live := e.srv.Live(); len(live) != 0 || len(res.Instances) != 0 {
		t.Fatalf("%d instances left running (%d returned); all-or-nothing wants none", len(live), len(res.Instances))
	}
	if len(res.Failed) != 4 {
		t.Errorf("failed = %v, want all 4 nodes", res.Failed)
	}
	f := callsOf(e.srv, "CreateFleet")[0].Params
	for k, want := range map[string]string{"SpotOptions.MinTargetCapacity": "4", "SpotOptions.SingleAvailabilityZone": "true",
		"TargetCapacitySpecification.TotalTargetCapacity": "4", "LaunchTemplateConfigs.1.Overrides.1.Placement.GroupName": "burst-pg"} {
		if f.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, f.Get(k), want)
		}
	}
	// With 4 in one zone the job launches there, each node knowing its name.
	e.srv.SetCapacity("p4d.24xlarge", "us-east-1b", "spot", 4)
	if err := forgetCache(e); err != nil {
		t.Fatal(err)
	}
	req.Attempt = 2
	res, err = e.prov.Launch(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 4 {
		t.Fatalf("got %d instances, want 4", len(res.Instances))
	}
	var got []string
	for _, in := range res.Instances {
		if in.Zone != "us-east-1b" {
			t.Errorf("%s in %s, want every node in us-east-1b", in.Node, in.Zone)
		}
		// the node tag CreateTags gave it, as the instance sees it
		url, err := e.srv.IMDSURL(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if self, err := imdsGet(t, url, "tags/instance/"+TagNode); err != nil || self != in.Node {
			t.Errorf("instance %s is tagged %q (%v) in IMDS, provider says %q", in.ID, self, err, in.Node)
		}
		got = append(got, in.Node)
	}
	sort.Strings(got)
	if !slices.Equal(got, []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4"}) {
		t.Errorf("nodes = %v", got)
	}
	// Listed back with the same identities.
	list, err := e.prov.List(ctx(t))
	if err != nil || len(list) != 4 {
		t.Fatalf("list = %d, %v", len(list), err)
	}
}

// TestEnsuredTemplateHardening: the template burst makes allows IMDSv2
// tokens only, with a hop limit of 1 (a token never leaves the instance),
// and terminates on poweroff (the dead-man switch needs no EC2 rights).
func TestEnsuredTemplateHardening(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{ImageID: "ami-0abc"})
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1"), Offerings: []cloud.Offering{{InstanceType: "g5.xlarge", Zone: "us-east-1a", Capacity: capacity.OnDemand}}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := e.srv.Instance(res.Instances[0].ID)
	if m := got.MetadataOptions; m.HTTPTokens != "required" || m.HTTPPutResponseHopLimit != 1 || m.HTTPEndpoint != "enabled" || m.InstanceMetadataTags != "enabled" {
		t.Errorf("metadata options %+v; want required tokens, hop limit 1, tags in metadata", m)
	}
	if got.ShutdownBehavior != "terminate" {
		t.Errorf("shutdown behaviour %q, want terminate", got.ShutdownBehavior)
	}
}

// TestFleetLaunchIndexesCollide: EC2 does not promise a fleet's launch
// indexes are 0..n-1; whatever they are, each instance gets its own node by
// CreateTags and the fleet launches.
func TestFleetLaunchIndexesCollide(t *testing.T) {
	for _, mode := range []ec2emu.LaunchIndexMode{ec2emu.LaunchIndexCollide, ec2emu.LaunchIndexSparse} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, ec2emu.Options{LaunchIndexes: mode}, Options{})
			req := cloud.LaunchRequest{Nodes: nodes(5, "gpu-1", "gpu-2", "gpu-3"), AllOrNothing: true, Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")}}
			res, err := e.prov.Launch(ctx(t), req)
			if err != nil {
				t.Fatalf("launch with %s launch indexes: %v", mode, err)
			}
			seen := map[string]string{}
			for _, in := range res.Instances {
				got, _ := e.srv.Instance(in.ID)
				node := got.Tags[TagNode]
				if node == "" || node != in.Node || seen[node] != "" {
					t.Errorf("instance %s (launch index %d): tag %q, provider %q, already %q", in.ID, got.LaunchIndex, node, in.Node, seen[node])
				}
				seen[node] = in.ID
			}
			if len(seen) != 3 || e.srv.CallCount("CreateTags") != 3 {
				t.Errorf("nodes %v, %d CreateTags calls; want 3 and 3", seen, e.srv.CallCount("CreateTags"))
			}
		})
	}
}

func TestRetriedLaunchCreatesNoDuplicate(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	req := cloud.LaunchRequest{Nodes: nodes(9, "gpu-1"), Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")}, Attempt: 1}
	// The first response is lost after the fleet was made: the SDK retries
	// with the same ClientToken.
	e.srv.InjectFault(ec2emu.Fault{Action: "CreateFleet", Code: "InternalError", Count: 1, AfterEffect: true})
	r1, err := e.prov.Launch(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	// The resume program runs again for the same attempt.
	r2, err := e.prov.Launch(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.srv.Instances()) != 1 {
		t.Fatalf("%d instances exist, want 1", len(e.srv.Instances()))
	}
	if r1.Instances[0].ID != r2.Instances[0].ID || !slices.Equal(r2.Reused, []string{"gpu-1"}) {
		t.Errorf("second launch = %+v, want the first instance reused", r2)
	}
	// A second process that cannot see the instance yet still gets the same fleet by token.
	p2, _ := New(e.client, Options{Cluster: "test", Subnets: testSubnets, LaunchTemplateName: e.lt})
	offs := p2.candidates(req)
	ins, _, err := p2.fleet(ctx(t), e.lt, req, req.Nodes, offs, phaseKey(spotStrategy(req), offs[0]))
	if err != nil || len(ins) != 1 || ins[0].ID != r1.Instances[0].ID {
		t.Errorf("repeated fleet = %+v, %v; want the same instance", ins, err)
	}
	if len(e.srv.Instances()) != 1 {
		t.Errorf("%d instances exist after the repeated CreateFleet, want 1", len(e.srv.Instances()))
	}
}

func TestThrottlingAbsorbedWithoutDuplicates(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	e.srv.InjectFault(ec2emu.Fault{Action: "CreateFleet", Code: "RequestLimitExceeded", Count: 4})
	e.srv.InjectFault(ec2emu.Fault{Action: "CreateFleet", Code: "RequestLimitExceeded", Count: 2, AfterEffect: true})
	e.srv.InjectFault(ec2emu.Fault{Action: "DescribeInstances", Code: "RequestLimitExceeded", Count: 2})
	names := []string{"gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"}
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(5, names...), Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Instances) != 5 || len(res.Failed) != 0 {
		t.Fatalf("got %d instances, failed %v; want 5", len(res.Instances), res.Failed)
	}
	if n := len(e.srv.Instances()); n != 5 {
		t.Errorf("%d instances in EC2, want 5 (no duplicates)", n)
	}
	throttled := 0
	for _, c := range e.srv.Calls() {
		if c.Code == "RequestLimitExceeded" {
			throttled++
		}
	}
	if throttled != 8 {
		t.Errorf("%d throttled calls, want the 8 injected", throttled)
	}
}

func TestThrottlingSurfacesAsTyped(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	e.srv.InjectFault(ec2emu.Fault{Action: "CreateFleet", Code: "RequestLimitExceeded"})
	_, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(5, "gpu-1"), Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")}})
	if !errors.Is(err, cloud.ErrThrottled) {
		t.Fatalf("err = %v, want throttled", err)
	}
	if !strings.Contains(cloud.Reason(err), "RequestLimitExceeded") {
		t.Errorf("reason %q", cloud.Reason(err))
	}
	e.srv.InjectFault(ec2emu.Fault{Action: "DescribeInstances", Code: "UnauthorizedOperation"})
	if _, err := e.prov.List(ctx(t)); !errors.Is(err, cloud.ErrUnauthorized) {
		t.Fatalf("err = %v, want unauthorized", err)
	}
}

func TestTerminate2500InThreeCalls(t *testing.T) {
	e := newEnv(t, ec2emu.Options{BucketSize: -1}, Options{})
	for _, n := range []int32{1000, 1000, 500} {
		_, err := e.client.RunInstances(ctx(t), &ec2.RunInstancesInput{ImageId: aws.String("ami-0123"), InstanceType: types.InstanceTypeG5Xlarge,
			MinCount: aws.Int32(n), MaxCount: aws.Int32(n), SubnetId: aws.String("subnet-a"),
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String("test")}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	e.srv.ResetCalls()
	list, err := e.prov.List(ctx(t))
	if err != nil || len(list) != 2500 {
		t.Fatalf("list = %d, %v; want 2500", len(list), err)
	}
	if n := e.srv.CallCount("DescribeInstances"); n != 3 {
		t.Errorf("%d DescribeInstances pages, want 3", n)
	}
	ids := make([]string, len(list))
	for i, in := range list {
		ids[i] = in.ID
	}
	ids = append(ids, "i-0fffffffffffffff0") // already gone: ignored
	done, err := e.prov.TerminateIDs(ctx(t), ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 2500 {
		t.Errorf("%d ids accepted, want the 2500 live ones (not the one already gone)", len(done))
	}
	if live := e.srv.Live(); len(live) != 0 {
		t.Errorf("%d instances still live", len(live))
	}
	calls := callsOf(e.srv, "TerminateInstances")
	// distinct batches: the SDK may resend a request whose answer was slow
	// on a loaded machine (same batch, same first id); that is one call
	batches := map[string]bool{}
	for _, c := range calls {
		if c.Code == "" {
			batches[c.Params.Get("InstanceId.1")] = true
		}
	}
	if len(batches) != 3 {
		t.Errorf("%d distinct successful TerminateInstances batches (%d requests in all), want 3", len(batches), len(calls))
	}
}

func TestTerminateByNode(t *testing.T) {
	e := newEnv(t, ec2emu.Options{ShutdownDelay: 24 * time.Hour}, Options{})
	offs := []cloud.Offering{spot("g5.xlarge", "us-east-1a")}
	if _, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1", "gpu-2", "gpu-3"), Offerings: offs}); err != nil {
		t.Fatal(err)
	}
	gone, err := e.prov.Terminate(ctx(t), []string{"gpu-2", "gpu-9"})
	if err != nil || len(gone) != 1 || gone[0].Node != "gpu-2" {
		t.Fatalf("terminate = %+v, %v; want gpu-2's instance", gone, err)
	}
	list, _ := e.prov.List(ctx(t))
	live := map[string]string{}
	for _, in := range list {
		live[in.Node] = in.State
	}
	if live["gpu-2"] != "shutting-down" || live["gpu-1"] == "shutting-down" || live["gpu-3"] == "shutting-down" {
		t.Errorf("states = %v", live)
	}
}

func TestEnsuredLaunchTemplate(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{ImageID: "ami-0abc", InstanceProfile: "burst-node", SecurityGroupIDs: []string{"sg-1"}, UserData: "#!/bin/sh\necho hi\n"})
	offs := []cloud.Offering{spot("g5.xlarge", "us-east-1a")}
	r, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1"), Offerings: offs})
	if err != nil {
		t.Fatal(err)
	}
	// A second provider (another resume run) finds the template instead of creating it.
	p2, err := New(e.client, Options{Cluster: "test", Subnets: testSubnets, ImageID: "ami-0abc", InstanceProfile: "burst-node", SecurityGroupIDs: []string{"sg-1"}, UserData: "#!/bin/sh\necho hi\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-2"), Offerings: offs}); err != nil {
		t.Fatal(err)
	}
	if n := e.srv.CallCount("CreateLaunchTemplate"); n != 1 {
		t.Errorf("%d CreateLaunchTemplate calls, want 1", n)
	}
	url, _ := e.srv.IMDSURL(r.Instances[0].ID)
	b, _, err := imds.New(imds.Options{Endpoint: url, Timeout: 5 * time.Second}).UserData(context.Background(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "#!/bin/sh\necho hi\n" {
		t.Errorf("user data = %q", b)
	}
	if got, err := imdsGet(t, url, "tags/instance/"+TagNode); got != "gpu-1" {
		t.Errorf("node tag via IMDS = %q, %v (the ensured template must enable instance tags in metadata)", got, err)
	}
	// Per-request user data replaces the template's for that fleet.
	r3, err := p2.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(3, "gpu-3"), Offerings: offs, UserData: "#!/bin/sh\necho job 3\n"})
	if err != nil {
		t.Fatal(err)
	}
	url, _ = e.srv.IMDSURL(r3.Instances[0].ID)
	b, _, err = imds.New(imds.Options{Endpoint: url, Timeout: 5 * time.Second}).UserData(context.Background(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "#!/bin/sh\necho job 3\n" {
		t.Errorf("request user data = %q", b)
	}
}

// TestTwoClustersOneAccountTemplates: two clusters in one account and
// region with the same settings each ensure a launch template of their own
// and launch from it: EC2's client tokens are per account and region, so
// a token without the cluster would be the other cluster's, with other
// parameters (IdempotentParameterMismatch).
func TestTwoClustersOneAccountTemplates(t *testing.T) {
	po := Options{ImageID: "ami-0abc", InstanceProfile: "burst-node", SecurityGroupIDs: []string{"sg-1"}, UserData: "#!/bin/sh\necho hi\n"}
	e := newEnv(t, ec2emu.Options{}, po)
	offs := []cloud.Offering{spot("g5.xlarge", "us-east-1a")}
	for _, cl := range []string{"east", "west"} {
		o := po
		o.Cluster, o.Subnets = cl, testSubnets
		p, err := New(e.client, o)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.Launch(ctx(t), cloud.LaunchRequest{Cluster: cl, Nodes: nodes(1, "gpu-1"), Offerings: offs, Attempt: 1})
		if err != nil {
			t.Fatalf("cluster %s: %v", cl, err)
		}
		if len(r.Instances) != 1 || r.Instances[0].Tags[TagCluster] != cl {
			t.Errorf("cluster %s launched %+v", cl, r.Instances)
		}
	}
	if n := e.srv.CallCount("CreateLaunchTemplate"); n != 2 {
		t.Errorf("%d CreateLaunchTemplate calls, want one per cluster", n)
	}
}

func TestLaunchRejectsBadRequests(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	cases := map[string]cloud.LaunchRequest{
		"no nodes":      {Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")}},
		"no offerings":  {Nodes: nodes(1, "gpu-1")},
		"other cluster": {Cluster: "prod", Nodes: nodes(1, "gpu-1"), Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")}},
		"bad capacity":  {Nodes: nodes(1, "gpu-1"), Offerings: []cloud.Offering{{InstanceType: "g5.xlarge", Zone: "us-east-1a", Capacity: "reserved"}}},
		"dup node":      {Nodes: nodes(1, "gpu-1", "gpu-1"), Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")}},
	}
	for name, req := range cases {
		if _, err := e.prov.Launch(ctx(t), req); !errors.Is(err, cloud.ErrInvalid) {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
	if _, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1"), Offerings: []cloud.Offering{spot("g5.xlarge", "eu-west-1a")}}); !errors.Is(err, cloud.ErrInvalid) {
		t.Errorf("zone without subnet: err = %v, want invalid", err)
	}
	if e.srv.CallCount("CreateFleet") != 0 {
		t.Error("bad requests reached EC2")
	}
	if _, err := New(nil, Options{}); err == nil || !strings.Contains(err.Error(), "cluster name is empty") {
		t.Errorf("New with no options: %v", err)
	}
}

func TestSpotQuotaFallsBackToOnDemand(t *testing.T) {
	e := newEnv(t, ec2emu.Options{SpotInstanceLimit: 1}, Options{})
	offs := []cloud.Offering{spot("g5.xlarge", "us-east-1a")}
	if _, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1"), Offerings: offs}); err != nil {
		t.Fatal(err)
	}
	_, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(2, "gpu-2"), Offerings: offs})
	if !errors.Is(err, cloud.ErrQuota) || !strings.HasPrefix(cloud.Reason(err), "burst: MaxSpotInstanceCountExceeded for g5.xlarge spot in us-east-1a") {
		t.Fatalf("err = %v (reason %q), want the spot quota", err, cloud.Reason(err))
	}
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(2, "gpu-2"), Offerings: offs, OnDemandFallback: true})
	if err != nil || res.Instances[0].Capacity != capacity.OnDemand {
		t.Fatalf("with fallback: %+v, %v; want on-demand", res, err)
	}
}

// TestFailedFleetCallLeavesNothing: a CreateFleet that launches and then
// fails as a whole (EC2's 5xx after launching, or a lost answer; moto
// raises after launching part of a fleet) leaves none of its instances
// running, and nothing else of the cluster is touched.
func TestFailedFleetCallLeavesNothing(t *testing.T) {
	e := newEnv(t, ec2emu.Options{}, Options{})
	offs := []cloud.Offering{spot("g5.xlarge", "us-east-1a")}
	other, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(8, "gpu-9"), Offerings: offs})
	if err != nil || len(other.Instances) != 1 {
		t.Fatalf("launching another job's node: %v", err)
	}
	remove := e.srv.InjectFault(ec2emu.Fault{Action: "CreateFleet", Code: "InternalError", Status: 500, Count: 100, AfterEffect: true})
	for _, req := range []cloud.LaunchRequest{
		{Nodes: nodes(7, "gpu-1", "gpu-2"), AllOrNothing: true, Offerings: offs},
		{Nodes: nodes(6, "gpu-3"), Offerings: offs},
	} {
		res, err := e.prov.Launch(ctx(t), req)
		if err == nil || len(res.Instances) != 0 || len(res.Failed) != len(req.Nodes) {
			t.Fatalf("launch %v: %d instances, failed %v, err %v; want every node failed", req.Nodes, len(res.Instances), res.Failed, err)
		}
	}
	remove()
	live := e.srv.Live()
	if len(live) != 1 || live[0].ID != other.Instances[0].ID {
		var ids []string
		for _, in := range live {
			ids = append(ids, in.ID+" "+in.Tags[TagNode]+in.Tags[TagNodes])
		}
		t.Fatalf("live after the failed launches: %v; want only gpu-9's %s", ids, other.Instances[0].ID)
	}
	if n := len(e.srv.Instances()); n != 4 {
		t.Errorf("%d instances in EC2, want 4 (gpu-9's and the three the failed calls made)", n)
	}
}
