package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/burst-hpc/burst/internal/config"
)

// fakeEC2 answers every DryRun with DryRunOperation unless the action is
// denied, and describes what it holds.
type fakeEC2 struct {
	denied  map[string]bool
	subnets map[string]string // id -> zone
	groups  map[string]bool
	images  map[string]bool
}

func (f *fakeEC2) dry(action string) error {
	if f.denied[action] {
		return &smithy.GenericAPIError{Code: codeUnauthorized, Message: "not authorized: ec2:" + action}
	}
	return &smithy.GenericAPIError{Code: codeDryRun, Message: "Request would have succeeded, but DryRun flag is set."}
}

func (f *fakeEC2) RunInstances(context.Context, *ec2.RunInstancesInput, ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error) {
	return nil, f.dry("RunInstances")
}
func (f *fakeEC2) CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return nil, f.dry("CreateFleet")
}
func (f *fakeEC2) CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	return nil, f.dry("CreateTags")
}
func (f *fakeEC2) TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return nil, f.dry("TerminateInstances")
}
func (f *fakeEC2) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return nil, f.dry("DescribeInstances")
}
func (f *fakeEC2) DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	return nil, f.dry("DescribeSpotPriceHistory")
}
func (f *fakeEC2) DescribeCapacityReservations(context.Context, *ec2.DescribeCapacityReservationsInput, ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error) {
	return nil, f.dry("DescribeCapacityReservations")
}
func (f *fakeEC2) DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	return nil, f.dry("DescribeInstanceStatus")
}
func (f *fakeEC2) DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	return nil, f.dry("DescribeLaunchTemplates")
}
func (f *fakeEC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	out := &ec2.DescribeSubnetsOutput{}
	for _, id := range in.SubnetIds {
		z, ok := f.subnets[id]
		if !ok {
			return nil, &smithy.GenericAPIError{Code: "InvalidSubnetID.NotFound", Message: "The subnet ID '" + id + "' does not exist"}
		}
		out.Subnets = append(out.Subnets, types.Subnet{SubnetId: aws.String(id), AvailabilityZone: aws.String(z)})
	}
	return out, nil
}
func (f *fakeEC2) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	out := &ec2.DescribeSecurityGroupsOutput{}
	for _, id := range in.GroupIds {
		if !f.groups[id] {
			return nil, &smithy.GenericAPIError{Code: "InvalidGroup.NotFound", Message: "The security group '" + id + "' does not exist"}
		}
		out.SecurityGroups = append(out.SecurityGroups, types.SecurityGroup{GroupId: aws.String(id)})
	}
	return out, nil
}
func (f *fakeEC2) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	out := &ec2.DescribeImagesOutput{}
	for _, id := range in.ImageIds {
		if !f.images[id] {
			return nil, &smithy.GenericAPIError{Code: "InvalidAMIID.NotFound", Message: "The image id '[" + id + "]' does not exist"}
		}
		out.Images = append(out.Images, types.Image{ImageId: aws.String(id)})
	}
	return out, nil
}

type fakeSQS struct{ missing bool }

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if f.missing {
		return nil, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue", Message: "The specified queue does not exist."}
	}
	if in.VisibilityTimeout != 0 {
		return nil, errors.New("doctor must leave messages visible")
	}
	return &sqs.ReceiveMessageOutput{}, nil
}

type fakeSizer struct {
	version string
	err     error
}

func (f fakeSizer) Health(context.Context) (string, error) { return f.version, f.err }

// install lays out a complete install in a temporary directory.
func install(t *testing.T) (Env, *fakeEC2, *fakeSQS) {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Source = filepath.Join(dir, "burst.yaml")
	cfg.Cluster.Name, cfg.Cluster.Region = "c1", "us-east-1"
	cfg.Slurm.BurstBin = filepath.Join(dir, "bin")
	os.MkdirAll(cfg.Slurm.BurstBin, 0o755)
	for _, b := range headBinaries {
		os.WriteFile(filepath.Join(cfg.Slurm.BurstBin, b), []byte("#!/bin/sh\n"), 0o755)
	}
	cfg.Sizer.StateDir = filepath.Join(dir, "state")
	os.MkdirAll(filepath.Join(cfg.Sizer.StateDir, "tls"), 0o750)
	write := func(p string, mode os.FileMode) string {
		if err := os.WriteFile(p, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	cfg.Sizer.TokenFile = write(filepath.Join(dir, "sizer.token"), 0o600)
	cfg.Sizer.TLS.CAFile = write(filepath.Join(dir, "ca.pem"), 0o644)
	cfg.Sizer.TLS.CertFile, cfg.Sizer.TLS.KeyFile = "", ""
	write(cfg.Sizer.CertPath(), 0o644)
	write(cfg.Sizer.KeyPath(), 0o600)
	cfg.Sizer.IdentityCert = write(filepath.Join(dir, "ec2-identity.pem"), 0o644)
	cfg.Network.Subnets = map[string]string{"us-east-1a": "subnet-a"}
	cfg.Network.SecurityGroups = []string{"sg-1"}
	cfg.Image.AMI = "ami-1"
	cfg.Interruptions.QueueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/burst"
	fe := &fakeEC2{denied: map[string]bool{}, subnets: map[string]string{"subnet-a": "us-east-1a"}, groups: map[string]bool{"sg-1": true}, images: map[string]bool{"ami-1": true}}
	fq := &fakeSQS{}
	e := Env{Cfg: cfg, EC2: fe, SQS: fq, Sizer: fakeSizer{version: "v1"}, Version: "v1",
		Credentials: func(context.Context) (string, error) { return "EnvConfigCredentials", nil },
		Slurm: func(context.Context, *config.Config, string) (string, []string, error) {
			return "24.11.5", nil, nil
		}}
	return e, fe, fq
}

func find(r Report, prefix string) Result {
	for _, x := range r {
		if strings.HasPrefix(x.Check, prefix) {
			return x
		}
	}
	return Result{Check: prefix, Status: "missing"}
}

func TestAllOK(t *testing.T) {
	e, _, _ := install(t)
	r := Run(context.Background(), e)
	for _, x := range r {
		if x.Status != OK {
			t.Errorf("%s: %s %s (%s)", x.Check, x.Status, x.Detail, x.Fix)
		}
	}
	if r.Failed() {
		t.Error("a complete install failed")
	}
	for _, want := range []string{"config", "binary ", "slurm ", "admin token", "sizer CA", "sizer TLS key", "EC2 identity", "state dir", "sizer reachable", "aws credentials",
		"iam ec2:RunInstances", "iam ec2:TerminateInstances", "iam ec2:CreateFleet", "subnet subnet-a", "security group sg-1", "ami ami-1", "interruption queue"} {
		if find(r, want).Status == "missing" {
			t.Errorf("no check %q", want)
		}
	}
	var b bytes.Buffer
	r.Print(&b)
	if lines := strings.Count(b.String(), "\n"); lines != len(r)+1 {
		t.Errorf("%d lines for %d checks (want one each and a summary):\n%s", lines, len(r), b.String())
	}
}

func TestBroken(t *testing.T) {
	e, fe, fq := install(t)
	os.Chmod(e.Cfg.Sizer.TokenFile, 0o644)
	os.Remove(filepath.Join(e.Cfg.Slurm.BurstBin, "burst-suspend"))
	os.Chmod(e.Cfg.Sizer.TLS.CAFile, 0o666)
	delete(fe.subnets, "subnet-a")
	delete(fe.images, "ami-1")
	fe.denied["TerminateInstances"] = true
	fq.missing = true
	e.Sizer = fakeSizer{err: errors.New("connection refused")}
	e.Slurm = func(context.Context, *config.Config, string) (string, []string, error) {
		return "24.11.5", []string{"SuspendProgram is not set", "a", "b", "c"}, nil
	}
	r := Run(context.Background(), e)
	if !r.Failed() {
		t.Fatal("a broken install passed")
	}
	for _, c := range []struct{ check, inDetail, inFix string }{
		{"admin token", "mode 0644", "chmod 600"},
		{"binary " + filepath.Join(e.Cfg.Slurm.BurstBin, "burst-suspend"), "no such file", "slurm.burst_bin"},
		{"sizer CA", "writable by group or others", "chmod go-w"},
		{"subnet subnet-a", "does not exist", "network.subnets"},
		{"ami ami-1", "does not exist", "image.ami"},
		{"iam ec2:TerminateInstances", "denied", "iam-policy"},
		{"interruption queue", "does not exist", "queue_url"},
		{"sizer reachable", "connection refused", "burst-sizer serve"},
		{"slurm ", "4 difference(s)", "burst-slurm-conf --out"},
	} {
		x := find(r, c.check)
		if x.Status != Fail || !strings.Contains(x.Detail, c.inDetail) || !strings.Contains(x.Fix, c.inFix) {
			t.Errorf("%s: %s %q -> %q; want FAIL naming %q, fix %q", x.Check, x.Status, x.Detail, x.Fix, c.inDetail, c.inFix)
		}
	}
	if x := find(r, "iam ec2:RunInstances"); x.Status != OK {
		t.Errorf("RunInstances (allowed): %+v", x)
	}
	if x := find(r, "security group sg-1"); x.Status != OK {
		t.Errorf("sg-1 (exists): %+v", x)
	}
	var b bytes.Buffer
	if err := r.JSON(&b); err != nil {
		t.Fatal(err)
	}
	var js struct {
		Checks   []map[string]any `json:"checks"`
		Failures int              `json:"failures"`
	}
	if err := json.Unmarshal(b.Bytes(), &js); err != nil || js.Failures < 9 || len(js.Checks) != len(r) || js.Checks[0]["check"] == nil {
		t.Errorf("JSON report: %v %s", err, b.String())
	}
}

func TestSizerOtherVersionWarns(t *testing.T) {
	e, _, _ := install(t)
	e.Sizer = fakeSizer{version: "v0"}
	if x := find(Run(context.Background(), e), "sizer reachable"); x.Status != Warn || !strings.Contains(x.Detail, "v0") {
		t.Errorf("sizer of another version: %+v", x)
	}
}
