package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

// EC2 is the part of the aws-sdk-go-v2 EC2 client doctor calls: each
// action burst uses with DryRun, and the describes of the network and image.
type EC2 interface {
	RunInstances(ctx context.Context, in *ec2.RunInstancesInput, optFns ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, optFns ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	CreateTags(ctx context.Context, in *ec2.CreateTagsInput, optFns ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// SQS is the part of the SQS client doctor calls.
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
}

// Error codes EC2 answers a DryRun with.
const (
	codeDryRun       = "DryRunOperation"       // the call would have succeeded
	codeUnauthorized = "UnauthorizedOperation" // the IAM policy denies it
)

// probeInstance is a well-formed instance id no account has: the dry runs
// of TerminateInstances and CreateTags check the permission, not the id.
const probeInstance = "i-00000000000000000"

// dryRuns are the EC2 actions burst calls (internal/iampolicy grants
// them), each as a DryRun call.
func dryRuns(e Env) []struct {
	action string
	call   func(ctx context.Context) error
} {
	cfg, api := e.Cfg, e.EC2
	dry := aws.Bool(true)
	tag := []types.Tag{{Key: aws.String("burst:cluster"), Value: aws.String(cfg.Cluster.Name)}}
	var subnet string
	for _, s := range cfg.Network.Subnets {
		subnet = s
		break
	}
	typ := "g6.xlarge"
	for _, c := range cfg.Classes {
		if len(c.InstanceTypes) > 0 {
			typ = c.InstanceTypes[0]
			break
		}
	}
	run := &ec2.RunInstancesInput{DryRun: dry, MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: types.InstanceType(typ),
		SecurityGroupIds: cfg.Network.SecurityGroups, TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: tag}}}
	if cfg.Image.AMI != "" {
		run.ImageId = aws.String(cfg.Image.AMI)
	}
	if cfg.Image.LaunchTemplate != "" {
		run.LaunchTemplate = &types.LaunchTemplateSpecification{LaunchTemplateName: aws.String(cfg.Image.LaunchTemplate)}
	}
	if subnet != "" {
		run.SubnetId = aws.String(subnet)
	}
	fleetLT := cfg.Image.LaunchTemplate
	if fleetLT == "" {
		fleetLT = "burst-" + cfg.Cluster.Name
	}
	return []struct {
		action string
		call   func(ctx context.Context) error
	}{
		{"RunInstances", func(ctx context.Context) error { _, err := api.RunInstances(ctx, run); return err }},
		{"CreateFleet", func(ctx context.Context) error {
			_, err := api.CreateFleet(ctx, &ec2.CreateFleetInput{DryRun: dry, Type: types.FleetTypeInstant,
				TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeOnDemand},
				LaunchTemplateConfigs:       []types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(fleetLT), Version: aws.String("$Latest")}}}})
			return err
		}},
		{"CreateTags", func(ctx context.Context) error {
			_, err := api.CreateTags(ctx, &ec2.CreateTagsInput{DryRun: dry, Resources: []string{probeInstance}, Tags: tag})
			return err
		}},
		{"TerminateInstances", func(ctx context.Context) error {
			_, err := api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{DryRun: dry, InstanceIds: []string{probeInstance}})
			return err
		}},
		{"DescribeInstances", func(ctx context.Context) error {
			_, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{DryRun: dry})
			return err
		}},
		{"DescribeSpotPriceHistory", func(ctx context.Context) error {
			_, err := api.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{DryRun: dry, InstanceTypes: []types.InstanceType{types.InstanceType(typ)}})
			return err
		}},
		{"DescribeLaunchTemplates", func(ctx context.Context) error {
			_, err := api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{DryRun: dry})
			return err
		}},
		{"DescribeCapacityReservations", func(ctx context.Context) error {
			_, err := api.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{DryRun: dry})
			return err
		}},
		{"DescribeInstanceStatus", func(ctx context.Context) error {
			_, err := api.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{DryRun: dry})
			return err
		}},
	}
}

func apiCode(err error) (string, string) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode(), ae.ErrorMessage()
	}
	return "", ""
}

func checkAWS(ctx context.Context, e Env) []Result {
	cfg := e.Cfg
	var out []Result
	if e.Credentials != nil {
		res := Result{Check: "aws credentials"}
		cctx, cancel := bounded(ctx, e)
		src, err := e.Credentials(cctx)
		cancel()
		if err != nil {
			res.Status, res.Detail, res.Fix = Fail, err.Error(), "give the head node an instance role (or AWS_PROFILE / AWS_ACCESS_KEY_ID) with `burst-slurm-conf iam-policy`"
			out = append(out, res)
			return out
		}
		res.Status, res.Detail = OK, "from "+src
		out = append(out, res)
	}
	if e.EC2 == nil {
		return append(out, Result{Check: "ec2 " + cfg.Cluster.Region, Status: Fail, Detail: fmt.Sprintf("no EC2 client: %v", e.EC2Err), Fix: "check cluster.region and cluster.ec2_endpoint in " + cfg.Source})
	}
	for _, d := range dryRuns(e) {
		res := Result{Check: "iam ec2:" + d.action}
		cctx, cancel := bounded(ctx, e)
		err := d.call(cctx)
		cancel()
		code, msg := apiCode(err)
		switch {
		case code == codeDryRun:
			res.Status, res.Detail = OK, "allowed (DryRun)"
		case code == codeUnauthorized:
			res.Status, res.Detail, res.Fix = Fail, "denied: "+msg, "attach the policy `burst-slurm-conf iam-policy` prints to the head node's role"
		case err == nil:
			res.Status, res.Detail, res.Fix = Warn, "EC2 ignored DryRun and ran the call", "report this: DryRun calls must never act"
		default:
			res.Status, res.Detail, res.Fix = Fail, err.Error(), "check the network path to EC2 and cluster.ec2_endpoint"
		}
		out = append(out, res)
	}
	out = append(out, checkNetwork(ctx, e)...)
	out = append(out, checkQueue(ctx, e)...)
	return out
}

func checkNetwork(ctx context.Context, e Env) []Result {
	cfg := e.Cfg
	var out []Result
	if len(cfg.Network.Subnets) > 0 {
		var ids []string
		for _, id := range cfg.Network.Subnets {
			ids = append(ids, id)
		}
		cctx, cancel := bounded(ctx, e)
		o, err := e.EC2.DescribeSubnets(cctx, &ec2.DescribeSubnetsInput{SubnetIds: ids})
		cancel()
		found := map[string]string{}
		if o != nil {
			for _, s := range o.Subnets {
				found[aws.ToString(s.SubnetId)] = aws.ToString(s.AvailabilityZone)
			}
		}
		for zone, id := range cfg.Network.Subnets {
			out = append(out, exists("subnet "+id+" ("+zone+")", err, found[id] != "",
				func() string {
					if az := found[id]; az != "" && az != zone {
						return "it is in " + az + ", not " + zone
					}
					return ""
				}(), "network.subnets in "+cfg.Source))
		}
	}
	if len(cfg.Network.SecurityGroups) > 0 {
		cctx, cancel := bounded(ctx, e)
		o, err := e.EC2.DescribeSecurityGroups(cctx, &ec2.DescribeSecurityGroupsInput{GroupIds: cfg.Network.SecurityGroups})
		cancel()
		found := map[string]bool{}
		if o != nil {
			for _, g := range o.SecurityGroups {
				found[aws.ToString(g.GroupId)] = true
			}
		}
		for _, id := range cfg.Network.SecurityGroups {
			out = append(out, exists("security group "+id, err, found[id], "", "network.security_groups in "+cfg.Source))
		}
	}
	if cfg.Image.AMI != "" {
		cctx, cancel := bounded(ctx, e)
		o, err := e.EC2.DescribeImages(cctx, &ec2.DescribeImagesInput{ImageIds: []string{cfg.Image.AMI}})
		cancel()
		ok := o != nil && len(o.Images) == 1 && aws.ToString(o.Images[0].ImageId) == cfg.Image.AMI
		out = append(out, exists("ami "+cfg.Image.AMI, err, ok, "", "image.ami in "+cfg.Source+" (build one with `make image`)"))
	}
	return out
}

// exists is a describe's result for one id: a NotFound error or an
// answer without the id is a failure.
func exists(check string, err error, found bool, mismatch, key string) Result {
	res := Result{Check: check}
	code, msg := apiCode(err)
	switch {
	case err != nil && strings.Contains(code, "NotFound"):
		res.Status, res.Detail, res.Fix = Fail, "does not exist: "+msg, "create it or correct "+key
	case err != nil && code == codeUnauthorized:
		res.Status, res.Detail, res.Fix = Fail, "cannot be described: "+msg, "allow the Describe call to the head node's role, or check "+key+" by hand"
	case err != nil:
		res.Status, res.Detail, res.Fix = Fail, err.Error(), "check "+key
	case !found:
		res.Status, res.Detail, res.Fix = Fail, "does not exist in this account and region", "create it or correct "+key
	case mismatch != "":
		res.Status, res.Detail, res.Fix = Fail, mismatch, "correct "+key
	default:
		res.Status, res.Detail = OK, "exists"
	}
	return res
}

func checkQueue(ctx context.Context, e Env) []Result {
	url := e.Cfg.Interruptions.QueueURL
	if url == "" {
		return []Result{{Check: "interruption queue", Status: Warn, Detail: "interruptions.queue_url is not set: spot notices reach burst only through the nodes' metadata",
			Fix: "create the SQS queue and EventBridge rules (README step 3) and set interruptions.queue_url"}}
	}
	res := Result{Check: "interruption queue " + url}
	if e.SQS == nil {
		res.Status, res.Detail, res.Fix = Fail, fmt.Sprintf("no SQS client: %v", e.SQSErr), "check interruptions.queue_url in "+e.Cfg.Source
		return []Result{res}
	}
	cctx, cancel := bounded(ctx, e)
	defer cancel()
	// the one read burst's policy grants (sqs:ReceiveMessage); a message it
	// returns stays visible (VisibilityTimeout 0) for the sizer's reader
	_, err := e.SQS.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1, VisibilityTimeout: 0, WaitTimeSeconds: 0})
	code, msg := apiCode(err)
	switch {
	case err == nil:
		res.Status, res.Detail = OK, "exists and is readable"
	case strings.Contains(code, "NonExistentQueue") || strings.Contains(code, "QueueDoesNotExist"):
		res.Status, res.Detail, res.Fix = Fail, "does not exist: "+msg, "create it (README step 3) or correct interruptions.queue_url"
	default:
		res.Status, res.Detail, res.Fix = Fail, err.Error(), "allow sqs:ReceiveMessage and sqs:DeleteMessage on it (`burst-slurm-conf iam-policy`)"
	}
	return []Result{res}
}
