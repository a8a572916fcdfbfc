package ec2emu_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/ec2emu/awsmodel"
)

func start(t *testing.T, o ec2emu.Options) (*ec2emu.Server, *ec2.Client) {
	t.Helper()
	if o.Models == nil {
		o.Models = models(t)
	}
	s := ec2emu.New(o)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		for _, v := range s.ModelViolations() {
			t.Errorf("the emulator's response breaks AWS's API model: %s", v)
		}
	})
	c := ec2.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 1
				o.RateLimiter = ratelimit.None
			})
		},
	}, func(o *ec2.Options) { o.BaseEndpoint = aws.String(s.URL()) })
	return s, c
}

// models are botocore's EC2 and SQS models, which every emulator these
// tests start checks its responses against; without botocore the tests
// run unchecked (and fail under BURST_REQUIRE_TOOLS=1).
func models(t *testing.T) *awsmodel.Set {
	t.Helper()
	set, err := awsmodel.Default()
	if err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%v; BURST_REQUIRE_TOOLS=1 makes this a failure", err)
		}
		t.Logf("NOT CHECKING responses against AWS's API models: %v", err)
		return nil
	}
	return set
}

func code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

func run(t *testing.T, c *ec2.Client, n int32, spot bool, mut ...func(*ec2.RunInstancesInput)) (*ec2.RunInstancesOutput, error) {
	in := &ec2.RunInstancesInput{ImageId: aws.String("ami-1"), InstanceType: types.InstanceTypeG5Xlarge, MinCount: aws.Int32(n), MaxCount: aws.Int32(n),
		SubnetId:        aws.String("subnet-a"),
		MetadataOptions: &types.InstanceMetadataOptionsRequest{InstanceMetadataTags: types.InstanceMetadataTagsStateEnabled},
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance,
			Tags: []types.Tag{{Key: aws.String("burst:node"), Value: aws.String("gpu-1")}}}}}
	if spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot}
	}
	for _, m := range mut {
		m(in)
	}
	return c.RunInstances(context.Background(), in)
}

func TestRequiresAuthorizationAndVersion(t *testing.T) {
	s, _ := start(t, ec2emu.Options{})
	resp, err := http.PostForm(s.URL(), url.Values{"Action": {"DescribeInstances"}, "Version": {"2016-11-15"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), "<Code>AuthFailure</Code>") || !strings.Contains(string(b), "<RequestID>") {
		t.Errorf("unsigned request: %d %s", resp.StatusCode, b)
	}
	req, _ := http.NewRequest("POST", s.URL(), strings.NewReader("Action=DescribeInstances&Version=2013-01-01"))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("old API version: status %d, want 400", resp.StatusCode)
	}
}

func TestRunDescribeTerminateLifecycle(t *testing.T) {
	var mu sync.Mutex
	var started, stopped []string
	_, c := start(t, ec2emu.Options{TimeScale: 100, BootDelay: 2 * time.Second, ShutdownDelay: 2 * time.Second,
		AllocateIP: func(ec2emu.Instance) (string, error) { return "10.77.0.5", nil },
		OnStart: func(in ec2emu.Instance) {
			mu.Lock()
			defer mu.Unlock()
			if in.IMDSURL == "" {
				panic("OnStart without IMDS URL")
			}
			started = append(started, in.ID)
		},
		OnStop: func(in ec2emu.Instance) { mu.Lock(); defer mu.Unlock(); stopped = append(stopped, in.ID) },
	})
	out, err := run(t, c, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	in := out.Instances[0]
	id := aws.ToString(in.InstanceId)
	if in.State.Name != types.InstanceStateNamePending || aws.ToString(in.PrivateIpAddress) != "10.77.0.5" || in.InstanceLifecycle != types.InstanceLifecycleTypeSpot {
		t.Errorf("launched %+v", in)
	}
	waitState(t, c, id, "running")
	d, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("tag:burst:node"), Values: []string{"gpu-*"}}}})
	if err != nil || len(d.Reservations) != 1 || aws.ToString(d.Reservations[0].Instances[0].InstanceId) != id {
		t.Fatalf("describe by tag wildcard: %+v %v", d, err)
	}
	tr, err := c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err != nil || tr.TerminatingInstances[0].CurrentState.Name != "shutting-down" || tr.TerminatingInstances[0].PreviousState.Name != "running" {
		t.Fatalf("terminate: %+v %v", tr, err)
	}
	waitState(t, c, id, "terminated")
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 1 || len(stopped) != 1 {
		t.Errorf("hooks: started %v stopped %v", started, stopped)
	}
	_, err = c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0000000000000dead"}})
	if code(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("terminate unknown: %v", err)
	}
}

func waitState(t *testing.T, c *ec2.Client, id, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		d, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(state, string(d.Reservations[0].Instances[0].State.Name)) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never reached %s", id, state)
}

func TestCapacityTokenBucketAndClientToken(t *testing.T) {
	s, c := start(t, ec2emu.Options{BucketSize: 10, BucketRefill: 2})
	s.SetCapacity("g5.xlarge", "us-east-1a", "spot", 2)
	if _, err := run(t, c, 3, true); code(err) != "InsufficientInstanceCapacity" {
		t.Errorf("3 from a pool of 2: %v", err)
	}
	tok := func(in *ec2.RunInstancesInput) { in.ClientToken = aws.String("tok-1") }
	a, err := run(t, c, 2, true, tok)
	if err != nil {
		t.Fatal(err)
	}
	b, err := run(t, c, 2, true, tok)
	if err != nil || aws.ToString(b.Instances[0].InstanceId) != aws.ToString(a.Instances[0].InstanceId) {
		t.Errorf("same ClientToken: %v %v", b, err)
	}
	if _, err := run(t, c, 1, true, tok); code(err) != "IdempotentParameterMismatch" {
		t.Errorf("same token, other params: %v", err)
	}
	if got := s.Capacity("g5.xlarge", "us-east-1a", "spot"); got != 0 {
		t.Errorf("capacity left %d, want 0", got)
	}
	// 8 tokens left (10 - 2): 8 on-demand go, the 9th is throttled.
	if _, err := run(t, c, 8, false); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, c, 1, false); code(err) != "RequestLimitExceeded" {
		t.Errorf("empty bucket: %v", err)
	}
	if tk := s.Tokens(); tk > 1 {
		t.Errorf("tokens = %v, want < 1", tk)
	}
}

func TestFaults(t *testing.T) {
	s, c := start(t, ec2emu.Options{})
	remove := s.InjectFault(ec2emu.Fault{Action: "DescribeInstances", Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."})
	_, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{})
	if code(err) != "UnauthorizedOperation" {
		t.Errorf("err = %v", err)
	}
	remove()
	if _, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("after removal: %v", err)
	}
	s.InjectFault(ec2emu.Fault{Code: "RequestLimitExceeded", Count: 2})
	var codes []string
	for range 3 {
		_, err := c.DescribeInstanceTypes(context.Background(), &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"g5.xlarge"}})
		codes = append(codes, code(err))
	}
	if strings.Join(codes, ",") != "RequestLimitExceeded,RequestLimitExceeded," {
		t.Errorf("codes = %v", codes)
	}
	calls := s.Calls()
	if last := calls[len(calls)-1]; last.Action != "DescribeInstanceTypes" || last.Params.Get("InstanceType.1") != "g5.xlarge" || last.Code != "" {
		t.Errorf("recorded %+v", last)
	}
}

func TestSpotInterruptionIMDS(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 60, BootDelay: -1})
	out, err := run(t, c, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	u, err := s.IMDSURL(id)
	if err != nil {
		t.Fatal(err)
	}
	// IMDSv2 only: a GET without a token is refused.
	resp, err := http.Get(u + "/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("IMDSv1 GET: %d, want 401", resp.StatusCode)
	}
	cl := imds.New(imds.Options{Endpoint: u, ClientEnableState: imds.ClientEnabled})
	get := func(p string) (string, int) {
		o, err := cl.GetMetadata(context.Background(), &imds.GetMetadataInput{Path: p})
		if err != nil {
			var re interface{ HTTPStatusCode() int }
			if errors.As(err, &re) {
				return "", re.HTTPStatusCode()
			}
			t.Fatalf("%s: %v", p, err)
		}
		b, _ := io.ReadAll(o.Content)
		return string(b), 200
	}
	if _, st := get("spot/instance-action"); st != 404 {
		t.Errorf("before notice: %d, want 404", st)
	}
	if v, _ := get("tags/instance/burst:node"); v != "gpu-1" {
		t.Errorf("tag = %q", v)
	}
	if err := s.Rebalance(id); err != nil {
		t.Fatal(err)
	}
	if v, _ := get("events/recommendations/rebalance"); !strings.Contains(v, `"noticeTime"`) {
		t.Errorf("rebalance = %q", v)
	}
	before := s.Now()
	if err := s.Interrupt(id); err != nil {
		t.Fatal(err)
	}
	after := s.Now()
	v, st := get("spot/instance-action")
	var notice struct{ Action, Time string }
	if st != 200 || json.Unmarshal([]byte(v), &notice) != nil || notice.Action != "terminate" {
		t.Fatalf("notice = %d %q", st, v)
	}
	when, err := time.Parse(time.RFC3339, notice.Time)
	if err != nil {
		t.Fatal(err)
	}
	if lo, hi := before.Add(2*time.Minute-time.Second), after.Add(2*time.Minute); when.Before(lo) || when.After(hi) {
		t.Errorf("notice time %v, want two minutes after the interruption (%v..%v)", when, lo, hi)
	}
	// Two emulated minutes are 2 s here; then the instance terminates.
	waitState(t, c, id, "shutting-down|terminated")
	if err := s.Interrupt(id); err == nil {
		t.Error("interrupting a terminating instance succeeded")
	}
}

func TestControlAPI(t *testing.T) {
	s, c := start(t, ec2emu.Options{BootDelay: -1})
	post := func(path, body string) int {
		resp, err := http.Post(s.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post("/_emu/capacity?type=g5.xlarge&zone=us-east-1a&capacity=spot&n=1", ""); st != 204 {
		t.Fatalf("capacity: %d", st)
	}
	if st := post("/_emu/capacity?type=g5.xlarge&zone=us-east-1a&capacity=reserved&n=1", ""); st != 400 {
		t.Errorf("bad capacity type accepted: %d", st)
	}
	if _, err := run(t, c, 2, true); code(err) != "InsufficientInstanceCapacity" {
		t.Errorf("pool of 1 gave 2: %v", err)
	}
	out, err := run(t, c, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	resp, err := http.Get(s.URL() + "/_emu/instances")
	if err != nil {
		t.Fatal(err)
	}
	var list []ec2emu.Instance
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].IMDSURL == "" {
		t.Fatalf("instances = %+v, %v", list, err)
	}
	if st := post("/_emu/interrupt?id="+id, ""); st != 204 {
		t.Errorf("interrupt: %d", st)
	}
	if st := post("/_emu/fault", `{"Action":"DescribeInstances","Code":"RequestLimitExceeded","Count":1}`); st != 204 {
		t.Errorf("fault: %d", st)
	}
	if _, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{}); code(err) != "RequestLimitExceeded" {
		t.Errorf("injected fault: %v", err)
	}
	if st := post("/_emu/fault", `{"Code":"X","Bogus":1}`); st != 400 {
		t.Errorf("unknown fault field accepted: %d", st)
	}
}

func TestHooksRunInOrderPerInstance(t *testing.T) {
	var mu sync.Mutex
	var events []string
	startedHook := make(chan struct{})
	s, c := start(t, ec2emu.Options{BootDelay: -1,
		OnStart: func(in ec2emu.Instance) {
			close(startedHook)
			time.Sleep(20 * time.Millisecond) // a slow boot (e.g. starting slurmd)
			mu.Lock()
			defer mu.Unlock()
			events = append(events, "start "+in.Tags["burst:node"])
		},
		OnStop: func(in ec2emu.Instance) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, "stop "+in.Tags["burst:node"])
		},
	})
	out, err := run(t, c, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	<-startedHook // running now; terminate while OnStart still runs
	if _, err := c.TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{aws.ToString(out.Instances[0].InstanceId)}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close() // waits for the hooks
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(events, ";") != "start gpu-1;stop gpu-1" {
		t.Errorf("hook order = %v, want start then stop", events)
	}
}
