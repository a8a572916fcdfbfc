// Package cfn deploys burst-slurm-conf cloudformation's template into
// moto's CloudFormation (moto 5, python3 -m moto.server) and runs burst's
// own provider and SQS client against the resources the stack made.
package cfn

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/awssdk"
	"github.com/burst-hpc/burst/internal/capacity"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/burst-hpc/burst/internal/cfntemplate"
	"github.com/burst-hpc/burst/internal/cloud"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/compose"
	"github.com/burst-hpc/burst/internal/notices"
)

// python is the interpreter with moto (the machine image's pyenv).
func python(t *testing.T) string {
	t.Helper()
	p := os.Getenv("BURST_PYTHON") // as scripts/install-deps.sh checks it
	if p == "" {
		p = "python3"
	}
	if err := exec.Command(p, "-c", "import moto.server").Run(); err != nil {
		if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("moto's server is not importable by %s (%v) and BURST_REQUIRE_TOOLS=1: pip install 'moto[server]==5.2.1' or point BURST_PYTHON at a Python that has it", p, err)
		}
		t.Skipf("SKIPPING: moto not importable by %s (pip install 'moto[server]'); set BURST_REQUIRE_TOOLS=1 to make this a failure", p)
	}
	return p
}

// startMoto runs moto's server on a free loopback port until the test ends.
func startMoto(t *testing.T) string {
	py := python(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	log, _ := os.Create(filepath.Join(t.TempDir(), "moto.log"))
	cmd := exec.Command(py, "-m", "moto.server", "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting moto: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(2 * time.Minute) // a shared, slow machine: generous
	for {
		if r, err := http.Get(url + "/moto-api/"); err == nil {
			r.Body.Close()
			return url
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("moto did not answer on %s within 2 minutes:\n%s", url, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func awsCfg(t *testing.T, ctx context.Context) aws.Config {
	c, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion("us-east-1"),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("testing", "testing", "")))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStackInMoto(t *testing.T) {
	endpoint := startMoto(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, file, _, _ := runtime.Caller(0)
	cfg, err := compose.Load(filepath.Join(filepath.Dir(file), "..", "..", "examples", "burst.yaml"), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := cfntemplate.Build(cfntemplate.Options{ClusterTagKey: ec2p.TagCluster, Cluster: cfg.Cluster.Name, Region: cfg.Cluster.Region,
		MungeKeySource: cfg.Slurm.MungeKeySource, ControllerPort: cfg.Slurm.ControllerPort, SlurmdPort: 6818, SizerListen: cfg.Sizer.Listen})
	if err != nil {
		t.Fatal(err)
	}
	ac := awsCfg(t, ctx)
	ec := ec2.NewFromConfig(ac, func(o *ec2.Options) { o.BaseEndpoint = aws.String(endpoint) })
	cf := cloudformation.NewFromConfig(ac, func(o *cloudformation.Options) { o.BaseEndpoint = aws.String(endpoint) })
	vpcs, err := ec.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []ec2types.Filter{{Name: aws.String("is-default"), Values: []string{"true"}}}})
	if err != nil || len(vpcs.Vpcs) == 0 {
		t.Fatalf("moto's default VPC: %v %v", vpcs, err)
	}
	vpc := aws.ToString(vpcs.Vpcs[0].VpcId)
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("burst-ml-prod"), TemplateBody: aws.String(string(tpl)),
		Parameters:   []cftypes.Parameter{{ParameterKey: aws.String("VpcId"), ParameterValue: aws.String(vpc)}},
		Capabilities: []cftypes.Capability{cftypes.CapabilityCapabilityIam}}); err != nil {
		t.Fatalf("creating the stack: %v", err)
	}
	out := map[string]string{}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		d, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("burst-ml-prod")})
		if err != nil {
			t.Fatal(err)
		}
		st := d.Stacks[0]
		if st.StackStatus == cftypes.StackStatusCreateComplete {
			for _, o := range st.Outputs {
				out[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
			}
			break
		}
		if st.StackStatus != cftypes.StackStatusCreateInProgress || time.Now().After(deadline) {
			t.Fatalf("stack %s: %s", st.StackStatus, aws.ToString(st.StackStatusReason))
		}
	}
	t.Logf("stack outputs: %v", out)
	for _, k := range []string{"InterruptionQueueUrl", "NodeSecurityGroupId", "HeadNodeSecurityGroupId", "NodeInstanceProfileArn", "HeadNodePolicyArn"} {
		if out[k] == "" {
			t.Fatalf("the stack has no output %s: %v", k, out)
		}
	}
	sgs, err := ec.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{out["NodeSecurityGroupId"], out["HeadNodeSecurityGroupId"]}})
	if err != nil || len(sgs.SecurityGroups) != 2 {
		t.Fatalf("the stack's security groups: %v %v", sgs, err)
	}
	// the nodes' group lets them reach each other on all traffic, both
	// ways (EFA's requirement of its security group). moto's
	// CloudFormation does not model AWS::EC2::SecurityGroupEgress, so the
	// egress rule is checked in the template, the ingress rule in moto.
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	if err := json.Unmarshal(tpl, &doc); err != nil {
		t.Fatal(err)
	}
	egress := false
	for _, r := range doc.Resources {
		p := r.Properties
		if r.Type == "AWS::EC2::SecurityGroupEgress" && p["IpProtocol"] == "-1" &&
			fmt.Sprint(p["GroupId"]) == "map[Ref:NodeSecurityGroup]" && fmt.Sprint(p["DestinationSecurityGroupId"]) == "map[Ref:NodeSecurityGroup]" {
			egress = true
		}
	}
	if !egress {
		t.Error("the template has no all-traffic egress rule from the node security group to itself")
	}
	for _, g := range sgs.SecurityGroups {
		if aws.ToString(g.GroupId) != out["NodeSecurityGroupId"] {
			continue
		}
		self := func(perms []ec2types.IpPermission) bool {
			for _, p := range perms {
				for _, pair := range p.UserIdGroupPairs {
					if aws.ToString(p.IpProtocol) == "-1" && aws.ToString(pair.GroupId) == aws.ToString(g.GroupId) {
						return true
					}
				}
			}
			return false
		}
		if !self(g.IpPermissions) {
			t.Errorf("the node security group's ingress %+v; want all traffic from itself", g.IpPermissions)
		}
	}

	// burst's provider launches a node into the stack's security group with
	// its instance profile, and terminates it
	subnets, err := ec.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{vpc}}}})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("moto's default subnets: %v", err)
	}
	zone, subnet := aws.ToString(subnets.Subnets[0].AvailabilityZone), aws.ToString(subnets.Subnets[0].SubnetId)
	images, err := ec.DescribeImages(ctx, &ec2.DescribeImagesInput{})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("moto's images: %v", err)
	}
	api, err := ec2p.NewSDKClient(ctx, awssdk.Options{Region: "us-east-1", Endpoint: endpoint, StaticCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	prov, err := ec2p.New(api, ec2p.Options{Cluster: cfg.Cluster.Name, Subnets: map[string]string{zone: subnet},
		ImageID: aws.ToString(images.Images[0].ImageId), InstanceProfile: out["NodeInstanceProfileArn"],
		SecurityGroupIDs: []string{out["NodeSecurityGroupId"]}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := prov.Launch(ctx, cloud.LaunchRequest{Cluster: cfg.Cluster.Name, Attempt: 1,
		Nodes:     []cloud.NodeSpec{{Node: "l4-1", JobID: 7, Account: "ml", User: "alice", Class: "l4"}},
		Offerings: []cloud.Offering{{InstanceType: "g6.xlarge", Zone: zone, Capacity: capacity.OnDemand}}})
	if err != nil || len(res.Instances) != 1 {
		t.Fatalf("launching l4-1 into the stack's resources: %v (failed %v)", err, res.Failed)
	}
	id := res.Instances[0].ID
	d, err := ec.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(d.Reservations) == 0 {
		t.Fatal(err)
	}
	t.Logf("launched %s (%s)", id, d.Reservations[0].Instances[0].InstanceType)
	// what burst asked EC2 for: its launch template names the stack's node
	// group and instance profile (moto's CreateFleet does not copy a
	// template's groups onto the instance, so the instance cannot show it)
	lts, err := ec.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:" + ec2p.TagCluster), Values: []string{cfg.Cluster.Name}}}, Versions: []string{"$Latest"}})
	if err != nil {
		// moto filters versions by template only: list the templates first
		t.Logf("describing template versions by tag: %v", err)
	}
	if err != nil || len(lts.LaunchTemplateVersions) == 0 {
		all, err := ec.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
		if err != nil || len(all.LaunchTemplates) != 1 {
			t.Fatalf("burst's launch template: %v %v", all, err)
		}
		lts, err = ec.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
			LaunchTemplateId: all.LaunchTemplates[0].LaunchTemplateId, Versions: []string{"$Latest"}})
		if err != nil || len(lts.LaunchTemplateVersions) == 0 {
			t.Fatalf("burst's launch template versions: %v %v", lts, err)
		}
	}
	data := lts.LaunchTemplateVersions[0].LaunchTemplateData
	groups := data.SecurityGroupIds
	for _, ni := range data.NetworkInterfaces {
		groups = append(groups, ni.Groups...)
	}
	if len(groups) != 1 || groups[0] != out["NodeSecurityGroupId"] {
		t.Errorf("burst's launch template has groups %v; want the stack's node group %s", groups, out["NodeSecurityGroupId"])
	}
	if data.IamInstanceProfile == nil || aws.ToString(data.IamInstanceProfile.Arn) != out["NodeInstanceProfileArn"] {
		t.Errorf("burst's launch template has instance profile %+v; want the stack's %s", data.IamInstanceProfile, out["NodeInstanceProfileArn"])
	}
	if gone, err := prov.Terminate(ctx, []string{"l4-1"}); err != nil || len(gone) != 1 {
		t.Fatalf("terminating l4-1: %v %v", gone, err)
	}

	// burst's SQS client reads (and deletes) a message sent to the stack's queue
	sq, err := notices.NewSQSClient(ctx, awssdk.Options{Region: "us-east-1", Endpoint: endpoint, StaticCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	raw := sqs.NewFromConfig(ac, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	body := `{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"` + id + `","instance-action":"terminate"}}`
	if _, err := raw.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(out["InterruptionQueueUrl"]), MessageBody: aws.String(body)}); err != nil {
		t.Fatalf("sending to the stack's queue: %v", err)
	}
	got, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(out["InterruptionQueueUrl"]), WaitTimeSeconds: 5, MaxNumberOfMessages: 10})
	if err != nil || len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != body {
		t.Fatalf("burst's SQS client read %v (%v) from the stack's queue; want the message sent", got, err)
	}
	if _, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(out["InterruptionQueueUrl"]), ReceiptHandle: got.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
}
