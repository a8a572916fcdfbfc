package ec2emu_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

func TestMetadataOptionsRecordedAndEnforced(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1})
	for _, tc := range []struct {
		name   string
		req    *types.InstanceMetadataOptionsRequest
		want   types.InstanceMetadataOptionsResponse
		v1     int // status of a GET without a token
		v2     int // status of a GET with a token
		tagsOK bool
	}{
		{"defaults (an ImdsSupport v2.0 AMI)", nil,
			types.InstanceMetadataOptionsResponse{HttpTokens: "required", HttpPutResponseHopLimit: aws.Int32(2), HttpEndpoint: "enabled", HttpProtocolIpv6: "disabled", InstanceMetadataTags: "disabled"},
			401, 200, false},
		{"hop limit 1, tags", &types.InstanceMetadataOptionsRequest{HttpTokens: "required", HttpPutResponseHopLimit: aws.Int32(1), InstanceMetadataTags: "enabled"},
			types.InstanceMetadataOptionsResponse{HttpTokens: "required", HttpPutResponseHopLimit: aws.Int32(1), HttpEndpoint: "enabled", HttpProtocolIpv6: "disabled", InstanceMetadataTags: "enabled"},
			401, 200, true},
		{"IMDSv1 allowed", &types.InstanceMetadataOptionsRequest{HttpTokens: "optional", HttpProtocolIpv6: "enabled"},
			types.InstanceMetadataOptionsResponse{HttpTokens: "optional", HttpPutResponseHopLimit: aws.Int32(2), HttpEndpoint: "enabled", HttpProtocolIpv6: "enabled", InstanceMetadataTags: "disabled"},
			200, 200, false},
		{"endpoint off", &types.InstanceMetadataOptionsRequest{HttpEndpoint: "disabled"},
			types.InstanceMetadataOptionsResponse{HttpTokens: "required", HttpPutResponseHopLimit: aws.Int32(2), HttpEndpoint: "disabled", HttpProtocolIpv6: "disabled", InstanceMetadataTags: "disabled"},
			403, 403, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := launch1(t, c, false, func(in *ec2.RunInstancesInput) { in.MetadataOptions = tc.req })
			got := describe(t, c, id).MetadataOptions
			if got.HttpTokens != tc.want.HttpTokens || aws.ToInt32(got.HttpPutResponseHopLimit) != aws.ToInt32(tc.want.HttpPutResponseHopLimit) ||
				got.HttpEndpoint != tc.want.HttpEndpoint || got.HttpProtocolIpv6 != tc.want.HttpProtocolIpv6 ||
				got.InstanceMetadataTags != tc.want.InstanceMetadataTags || got.State != "applied" {
				t.Errorf("MetadataOptions = %+v, want %+v", *got, tc.want)
			}
			u, err := s.IMDSURL(id)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Get(u + "/latest/meta-data/instance-id")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.v1 || (tc.v1 == 200 && string(b) != id) {
				t.Errorf("IMDSv1 GET: %d %q, want %d", resp.StatusCode, b, tc.v1)
			}
			cl := imdsClient(t, s, id)
			if v, st := imdsGet(t, cl, "instance-id"); st != tc.v2 || (st == 200 && v != id) {
				t.Errorf("IMDSv2 GET: %d %q, want %d", st, v, tc.v2)
			}
			if _, st := imdsGet(t, cl, "tags/instance/burst:node"); (st == 200) != tc.tagsOK {
				t.Errorf("tags in metadata: %d, want enabled=%v", st, tc.tagsOK)
			}
		})
	}
	if _, err := run(t, c, 1, false, func(in *ec2.RunInstancesInput) {
		in.MetadataOptions = &types.InstanceMetadataOptionsRequest{HttpPutResponseHopLimit: aws.Int32(65)}
	}); code(err) != "InvalidParameterValue" {
		t.Errorf("hop limit 65: %v", err)
	}
}

func TestTokenRequestsThroughAProxyAreRefused(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1})
	u, err := s.IMDSURL(launch1(t, c, false))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPut, u+"/latest/api/token", nil)
	req.Header.Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "60")
	req.Header.Set("X-Forwarded-For", "10.0.0.9")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("token through a proxy: %d, want 403", resp.StatusCode)
	}
}

func TestLaunchTemplateOptionsReachFleetInstances(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 100, BootDelay: -1, ShutdownDelay: time.Second})
	ctx := context.Background()
	_, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("burst-gpu"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String("ami-1"), InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
			MetadataOptions: &types.LaunchTemplateInstanceMetadataOptionsRequest{HttpTokens: "required", HttpPutResponseHopLimit: aws.Int32(1), InstanceMetadataTags: "enabled"}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.CreateFleet(ctx, &ec2.CreateFleetInput{Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("burst-gpu"), Version: aws.String("$Default")},
			Overrides:                   []types.FleetLaunchTemplateOverridesRequest{{InstanceType: "g5.xlarge", SubnetId: aws.String("subnet-a")}}}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications:           []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("burst:node"), Value: aws.String("gpu-1")}}}}})
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("CreateFleet: %+v %v", out, err)
	}
	id := out.Instances[0].InstanceIds[0]
	m := describe(t, c, id).MetadataOptions
	if m.HttpTokens != "required" || aws.ToInt32(m.HttpPutResponseHopLimit) != 1 || m.InstanceMetadataTags != "enabled" {
		t.Errorf("fleet instance MetadataOptions = %+v", *m)
	}
	waitState(t, c, id, "running")
	if err := s.Shutdown(id); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, "shutting-down|terminated")
}

func TestTagsAddedAfterLaunchReachMetadata(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1})
	ctx := context.Background()
	id := launch1(t, c, false)
	cl := imdsClient(t, s, id)
	if _, st := imdsGet(t, cl, "tags/instance/burst:name"); st != 404 {
		t.Errorf("before CreateTags: %d", st)
	}
	if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{
		{Key: aws.String("burst:name"), Value: aws.String("gpu-7")}, {Key: aws.String("has space"), Value: aws.String("x")}}}); err != nil {
		t.Fatal(err)
	}
	if v, st := imdsGet(t, cl, "tags/instance/burst:name"); st != 200 || v != "gpu-7" {
		t.Errorf("after CreateTags: %d %q", st, v)
	}
	list, _ := imdsGet(t, cl, "tags/instance")
	keys := strings.Split(list, "\n")
	if !sort.StringsAreSorted(keys) || strings.Join(keys, ",") != "burst:name,burst:node" {
		t.Errorf("tags/instance = %q: a key IMDS cannot carry (a space) is left out", list)
	}
}

func TestFleetLaunchIndexModes(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1})
	ctx := context.Background()
	if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lt"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String("ami-1")}}); err != nil {
		t.Fatal(err)
	}
	fleet := func(n int32) []int {
		// Two pools of two: the fleet spans both.
		s.SetCapacity("g5.xlarge", "us-east-1a", "spot", 2)
		s.SetCapacity("g5.xlarge", "us-east-1b", "spot", 2)
		out, err := c.CreateFleet(ctx, &ec2.CreateFleetInput{Type: types.FleetTypeInstant,
			LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
				LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt")},
				Overrides: []types.FleetLaunchTemplateOverridesRequest{{InstanceType: "g5.xlarge", SubnetId: aws.String("subnet-a"), Priority: aws.Float64(1)},
					{InstanceType: "g5.xlarge", SubnetId: aws.String("subnet-b"), Priority: aws.Float64(2)}}}},
			SpotOptions:                 &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategyCapacityOptimizedPrioritized},
			TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(n), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeSpot}})
		if err != nil {
			t.Fatal(err)
		}
		var idx []int
		for _, fi := range out.Instances {
			for _, id := range fi.InstanceIds {
				idx = append(idx, int(aws.ToInt32(describe(t, c, id).AmiLaunchIndex)))
			}
		}
		return idx
	}
	post := func(mode string) int {
		resp, err := http.Post(s.URL()+"/_emu/launch-indexes?mode="+mode, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct{ mode, want string }{
		{"sequential", "[0 1 2 3]"}, {"per-pool", "[0 1 0 1]"}, {"collide", "[0 0 0 0]"}, {"sparse", "[0 2 4 6]"},
	} {
		if st := post(tc.mode); st != 204 {
			t.Fatalf("mode %s: %d", tc.mode, st)
		}
		if got := fmt.Sprint(fleet(4)); got != tc.want {
			t.Errorf("%s: launch indexes %s, want %s", tc.mode, got, tc.want)
		}
	}
	if st := post("random"); st != 400 {
		t.Errorf("unknown mode: %d", st)
	}
}

// TestIMDSHostPerInstance: with IMDSHostFor, each instance's metadata
// listener binds the address chosen for it (instances on different
// networks), and answers there.
func TestIMDSHostPerInstance(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1, IMDSHostFor: func(in ec2emu.Instance) string {
		if in.Tags["net"] == "b" {
			return "127.0.0.2"
		}
		return "127.0.0.1"
	}})
	for _, net := range []string{"a", "b"} {
		id := launch1(t, c, false, func(in *ec2.RunInstancesInput) {
			in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("net"), Value: aws.String(net)}}}}
		})
		u, err := s.IMDSURL(id)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"a": "http://127.0.0.1:", "b": "http://127.0.0.2:"}[net]
		if !strings.HasPrefix(u, want) {
			t.Errorf("instance on network %s: metadata at %s, want %s...", net, u, want)
		}
		if v, st := imdsGet(t, imdsClient(t, s, id), "instance-id"); st != 200 || v != id {
			t.Errorf("instance on network %s: instance-id %d %q", net, st, v)
		}
	}
}
