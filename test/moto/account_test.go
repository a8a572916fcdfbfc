// Package moto_test runs burst's own AWS code, unchanged, against moto (the
// Python AWS mock): an implementation of EC2, SQS, EventBridge and IAM that
// burst did not write. The lifecycle code burst-resume, burst-suspend and
// burst-sizer run (internal/lifecycle, the EC2 provider from the
// composition root, internal/notices) drives moto's EC2, with moto's IAM
// enforcement on and credentials that hold the policy burst-slurm-conf
// iam-policy prints. moto runs no user data, so no node boots here: the
// real-Slurm node lifecycle is test/e2e's, against test/ec2emu.
package moto_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/config/configtest"
	"github.com/burst-hpc/burst/internal/iampolicy"
	"github.com/burst-hpc/burst/internal/iampolicy/iampolicytest"
)

const (
	region    = "us-east-1"
	account   = "123456789012" // moto's default account
	queueName = "burst-demo-interruptions"
)

// account is a moto server set up as an admin would set up AWS for burst:
// the default VPC's subnets, an AMI, the interruption queue with its
// EventBridge rule, and an IAM user "burst" holding burst's policy.
type motoAccount struct {
	srv      *motoServer
	admin    aws.Config // an IAM user allowed everything (the test's own calls)
	cfg      *config.Config
	policy   []byte // what burst-slurm-conf iam-policy printed
	queueURL string // moto's URL of the interruption queue
	burst    aws.Config
}

// the three actions moto lets through before enforcing IAM: they create
// the admin user, its policy and its key
const noAuthActions = 3

func awsConfig(creds aws.CredentialsProvider) aws.Config {
	return aws.Config{Region: region, Credentials: creds}
}

func at(url string) func(*ec2.Options) {
	return func(o *ec2.Options) { o.BaseEndpoint = aws.String(url) }
}

func newAccount(t *testing.T) *motoAccount {
	t.Helper()
	srv := startMoto(t, noAuthActions)
	ctx := context.Background()
	a := &motoAccount{srv: srv}
	boot := iam.NewFromConfig(awsConfig(credentials.NewStaticCredentialsProvider("bootstrap", "bootstrap", "")), func(o *iam.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	a.admin = awsConfig(userKey(t, boot, "admin", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`))

	ec := ec2.NewFromConfig(a.admin, at(srv.URL))
	subnets, err := ec.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("default-for-az"), Values: []string{"true"}}}})
	if err != nil {
		t.Fatalf("describing moto's default subnets: %v", err)
	}
	sgs, err := ec.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{{Name: aws.String("group-name"), Values: []string{"default"}}}})
	if err != nil || len(sgs.SecurityGroups) == 0 {
		t.Fatalf("describing moto's default security group: %v", err)
	}
	imgs, err := ec.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{"x86_64"}}}})
	if err != nil || len(imgs.Images) == 0 {
		t.Fatalf("describing moto's images: %v", err)
	}

	cfg := configtest.Demo(t)
	cfg.Cluster.EC2Endpoint = srv.URL
	cfg.Cluster.EC2StaticCredentials = false // the default credential chain: the burst user's keys in the environment
	cfg.Network.Subnets = map[string]string{}
	for _, s := range subnets.Subnets {
		if z := aws.ToString(s.AvailabilityZone); z == "us-east-1a" || z == "us-east-1b" {
			cfg.Network.Subnets[z] = aws.ToString(s.SubnetId)
		}
	}
	if len(cfg.Network.Subnets) != 2 {
		t.Fatalf("moto's default subnets %+v: want one in us-east-1a and one in us-east-1b", subnets.Subnets)
	}
	cfg.Network.SecurityGroups = []string{aws.ToString(sgs.SecurityGroups[0].GroupId)}
	cfg.Image.AMI = aws.ToString(imgs.Images[0].ImageId)

	q := sqs.NewFromConfig(a.admin, func(o *sqs.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	cq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(queueName)})
	if err != nil {
		t.Fatalf("creating the interruption queue: %v", err)
	}
	a.queueURL = aws.ToString(cq.QueueUrl)
	eb := eventbridge.NewFromConfig(a.admin, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	pattern := `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning","EC2 Instance Rebalance Recommendation","EC2 Instance State-change Notification"]}`
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("burst-demo-ec2"), EventPattern: aws.String(pattern)}); err != nil {
		t.Fatalf("creating the EventBridge rule: %v", err)
	}
	qa, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: cq.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	queueARN := qa.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("burst-demo-ec2"),
		Targets: []ebTarget{{Id: aws.String("queue"), Arn: aws.String(queueARN), InputTransformer: envelope}}}); err != nil {
		t.Fatalf("targeting the queue from the rule: %v", err)
	}
	// burst.yaml names the queue by its AWS URL; the SQS endpoint is moto
	cfg.Interruptions.QueueURL = "https://sqs." + region + ".amazonaws.com/" + account + "/" + queueName
	cfg.Interruptions.SQSEndpoint = srv.URL
	if err := cfg.Validate(); err != nil {
		t.Fatalf("burst.yaml for moto: %v", err)
	}
	configtest.Write(t, cfg)
	a.cfg = cfg

	a.policy = iamPolicy(t, cfg.Source)
	if acts, err := iampolicytest.ActionsIn(a.policy); err != nil || !strings.Contains(strings.Join(acts, " "), "sqs:ReceiveMessage") {
		t.Fatalf("burst-slurm-conf iam-policy printed actions %v (%v): want the EC2 and the queue's SQS actions", acts, err)
	}
	adminIAM := iam.NewFromConfig(a.admin, func(o *iam.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	a.burst = awsConfig(userKey(t, adminIAM, "burst", string(motoView(t, a.policy))))
	return a
}

type ebTarget = ebtypes.Target

// envelope rebuilds EventBridge's event envelope on the way to the queue.
// moto 5.2.1 drops "account" from the events a rule sends to an SQS target
// (moto/events/utils.py EventTemplateParser.parse, used for every target
// without an input template), while AWS's event structure always carries
// it (EventBridge User Guide, "Amazon EventBridge events": version, id,
// detail-type, source, account, time, region, resources, detail), and
// burst's parser rightly refuses an event without it. An input transformer
// that writes the same envelope makes moto deliver what AWS delivers.
var envelope = &ebtypes.InputTransformer{
	InputPathsMap: map[string]string{"id": "$.id", "dt": "$.detail-type", "source": "$.source", "account": "$.account",
		"time": "$.time", "region": "$.region", "resources": "$.resources", "detail": "$.detail"},
	InputTemplate: aws.String(`{"version":"0","id":"<id>","detail-type":"<dt>","source":"<source>","account":"<account>",` +
		`"time":"<time>","region":"<region>","resources":<resources>,"detail":<detail>}`),
}

// userKey creates an IAM user with one inline policy and returns its
// access key.
func userKey(t *testing.T, c *iam.Client, name, policy string) aws.CredentialsProvider {
	t.Helper()
	ctx := context.Background()
	if _, err := c.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(name)}); err != nil {
		t.Fatalf("creating IAM user %s: %v", name, err)
	}
	if _, err := c.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String(name), PolicyName: aws.String(name), PolicyDocument: aws.String(policy)}); err != nil {
		t.Fatalf("giving IAM user %s its policy: %v", name, err)
	}
	k, err := c.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(name)})
	if err != nil {
		t.Fatalf("creating the access key of %s: %v", name, err)
	}
	return credentials.NewStaticCredentialsProvider(aws.ToString(k.AccessKey.AccessKeyId), aws.ToString(k.AccessKey.SecretAccessKey), "")
}

// iamPolicy runs burst-slurm-conf iam-policy on burst.yaml: $BURST_BIN's
// binary when there is one (make test), else one built now.
func iamPolicy(t *testing.T, conf string) []byte {
	t.Helper()
	bin := filepath.Join(os.Getenv("BURST_BIN"), "burst-slurm-conf")
	if os.Getenv("BURST_BIN") == "" {
		bin = filepath.Join(t.TempDir(), "burst-slurm-conf")
		b := exec.Command("go", "build", "-o", bin, "github.com/burst-hpc/burst/slurm-conf")
		b.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := b.CombinedOutput(); err != nil {
			t.Fatalf("building burst-slurm-conf: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(bin, "iam-policy", "--config", conf)
	cmd.Env = append(os.Environ(), "BURST_LOG_FILE="+filepath.Join(t.TempDir(), "slurm-conf.log"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("burst-slurm-conf iam-policy: %v", err)
	}
	return out
}

// motoView is the policy as moto can enforce it. moto 5.2.1 authorizes
// every EC2 request against the resource "*" (moto/core/responses.py,
// call_action: services without _determine_resource, EC2 among them; its
// iam/access_control.py lists resource support as a TODO), so a statement
// scoped to EC2 resource ARNs never matches there and would deny what AWS
// allows. Those statements keep their actions and conditions (moto skips
// conditions whose keys it does not know) with the resource "*"; the SQS
// statement keeps its queue ARN, which moto does check. What moto proves is
// therefore the action list: each call burst makes is allowed, and an
// action outside the policy is denied. The resource scoping is proven by
// internal/iampolicy's own tests.
func motoView(t *testing.T, policy []byte) []byte {
	t.Helper()
	var doc iampolicy.Document
	if err := json.Unmarshal(policy, &doc); err != nil {
		t.Fatalf("parsing the printed policy: %v", err)
	}
	for i, st := range doc.Statement {
		ec2Only := true
		for _, a := range st.Action {
			ec2Only = ec2Only && strings.HasPrefix(a, "ec2:")
		}
		if ec2Only {
			doc.Statement[i].Resource = []string{"*"}
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
