// Package cfntemplate builds the CloudFormation template of everything
// burst needs on AWS (burst-slurm-conf cloudformation): the head node's
// managed policy (internal/iampolicy's statements, with the stack's queue
// and node role in place of the ARNs an admin would pass), the node role
// (internal/iampolicy's node statements) and its instance profile, the
// interruption queue with its queue policy and the EventBridge rules that
// feed it, the head-node and node security groups, and optionally FSx for
// Lustre with an S3 data repository association. It is pure: config in,
// JSON out.
package cfntemplate

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/burst-hpc/burst/internal/iampolicy"
)

// Options are what the template is built from (burst.yaml and flags).
type Options struct {
	ClusterTagKey  string // burst:cluster
	Cluster        string // cluster.name
	Region         string // cluster.region
	MungeKeySource string // slurm.munge_key_source: a secret ARN grants the node role GetSecretValue on it
	ControllerPort int    // slurm.controller_port (slurmctld)
	SlurmdPort     int    // slurmd's port on the nodes
	SizerListen    string // sizer.listen (host:port): the nodes reach the sizer there
	// FSxS3 is an s3://bucket[/prefix] path: with it the template adds
	// FSx for Lustre and a data repository association at FSxPath.
	FSxS3       string
	FSxPath     string // file system path of the association (default /burst)
	FSxCapacity int    // GiB (default 1200, FSx's smallest PERSISTENT_2 size)
}

// The event types the queue receives (docs/OPERATIONS.md).
var ruleEvents = []struct{ name, detailType string }{
	{"SpotInterruptionRule", "EC2 Spot Instance Interruption Warning"},
	{"RebalanceRule", "EC2 Instance Rebalance Recommendation"},
	{"StateChangeRule", "EC2 Instance State-change Notification"},
	{"ScheduledEventRule", "AWS Health Event"}, // EC2's scheduled events (AWS Health's scheduledChange)
}

// placeholders stand for stack resources while iampolicy builds a policy;
// ref replaces each with the intrinsic function naming the resource.
const (
	placeholderAccount = "000000000000"
	placeholderQueue   = "burst-cfn-queue-placeholder"
	placeholderRole    = "arn:aws:iam::000000000000:role/burst-cfn-node-role-placeholder"
)

var s3Re = regexp.MustCompile(`^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9!_.*'()/-]*)?$`)

func (o *Options) validate() error {
	var probs []string
	if o.Region == "" {
		probs = append(probs, "cluster.region: required (the stack's resources and ARNs are regional)")
	}
	if o.ControllerPort < 1 || o.ControllerPort > 65535 {
		probs = append(probs, fmt.Sprintf("slurm.controller_port: %d is not a TCP port", o.ControllerPort))
	}
	if o.SlurmdPort < 1 || o.SlurmdPort > 65535 {
		probs = append(probs, fmt.Sprintf("slurmd port %d is not a TCP port", o.SlurmdPort))
	}
	if _, p, err := net.SplitHostPort(o.SizerListen); err != nil {
		probs = append(probs, fmt.Sprintf("sizer.listen: %q is not host:port", o.SizerListen))
	} else if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		probs = append(probs, fmt.Sprintf("sizer.listen: port %q is not a TCP port", p))
	}
	if o.FSxS3 != "" && !s3Re.MatchString(o.FSxS3) {
		probs = append(probs, fmt.Sprintf("--fsx-s3: %q is not s3://bucket[/prefix]", o.FSxS3))
	}
	if o.FSxPath == "" {
		o.FSxPath = "/burst"
	}
	if !strings.HasPrefix(o.FSxPath, "/") || strings.Contains(o.FSxPath, "..") {
		probs = append(probs, fmt.Sprintf("--fsx-path: %q is not an absolute path in the file system", o.FSxPath))
	}
	if o.FSxCapacity == 0 {
		o.FSxCapacity = 1200
	}
	if o.FSxCapacity < 1200 || o.FSxCapacity%2400 != 0 && o.FSxCapacity != 1200 {
		probs = append(probs, fmt.Sprintf("--fsx-capacity: %d GiB; FSx for Lustre PERSISTENT_2 takes 1200 or a multiple of 2400", o.FSxCapacity))
	}
	if len(probs) > 0 {
		return fmt.Errorf("building the CloudFormation template: %s", strings.Join(probs, "; "))
	}
	return nil
}

type obj = map[string]any

func getAtt(res, attr string) obj { return obj{"Fn::GetAtt": []string{res, attr}} }
func ref(name string) obj         { return obj{"Ref": name} }

// Build returns the template as JSON.
func Build(o Options) ([]byte, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	queueARN := fmt.Sprintf("arn:aws:sqs:%s:%s:%s", o.Region, placeholderAccount, placeholderQueue)
	head, err := iampolicy.Build(o.ClusterTagKey, o.Cluster, iampolicy.Options{Region: o.Region,
		PassRoleARN: placeholderRole, InterruptionQueueARN: queueARN})
	if err != nil {
		return nil, err
	}
	swap := map[string]any{queueARN: getAtt("InterruptionQueue", "Arn"), placeholderRole: getAtt("NodeRole", "Arn")}
	headDoc, err := substitute(head, swap)
	if err != nil {
		return nil, err
	}
	_, sizerPort, _ := net.SplitHostPort(o.SizerListen)
	sp, _ := strconv.Atoi(sizerPort)
	tags := []obj{{"Key": o.ClusterTagKey, "Value": o.Cluster}}

	res := accessResources(o, headDoc, tags, sp)
	if node, err := iampolicy.BuildNode(o.MungeKeySource, iampolicy.NodeOptions{}); err == nil {
		doc, err := substitute(node, nil)
		if err != nil {
			return nil, err
		}
		res["NodeRole"].(obj)["Properties"].(obj)["Policies"] = []obj{{"PolicyName": "burst-node", "PolicyDocument": doc}}
	} else if strings.HasPrefix(o.MungeKeySource, "arn:") {
		return nil, err // an ARN, but a bad one
	} // else the munge key is baked into the image: the node role needs no policy
	addInterruptionRules(res)
	outputs := obj{
		"HeadNodePolicyArn":       obj{"Description": "attach to the head node's role", "Value": ref("HeadNodePolicy")},
		"NodeRoleArn":             obj{"Value": getAtt("NodeRole", "Arn")},
		"NodeInstanceProfileArn":  obj{"Description": "burst.yaml image.instance_profile", "Value": getAtt("NodeInstanceProfile", "Arn")},
		"InterruptionQueueUrl":    obj{"Description": "burst.yaml interruptions.queue_url", "Value": ref("InterruptionQueue")},
		"InterruptionQueueArn":    obj{"Value": getAtt("InterruptionQueue", "Arn")},
		"HeadNodeSecurityGroupId": obj{"Description": "add to the head node's instance", "Value": getAtt("HeadNodeSecurityGroup", "GroupId")},
		"NodeSecurityGroupId":     obj{"Description": "burst.yaml network.security_groups", "Value": getAtt("NodeSecurityGroup", "GroupId")},
	}
	params := obj{"VpcId": obj{"Type": "AWS::EC2::VPC::Id", "Description": "the VPC of network.subnets (the head node's and the nodes')"}}
	if o.FSxS3 != "" {
		addFSx(o, tags, params, res, outputs)
	}
	t := obj{
		"AWSTemplateFormatVersion": "2010-09-09",
		"Description":              fmt.Sprintf("burst cluster %s: everything burst needs on AWS (written by burst-slurm-conf cloudformation)", o.Cluster),
		"Parameters":               params,
		"Resources":                res,
		"Outputs":                  outputs,
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the CloudFormation template: %w", err)
	}
	return append(b, '\n'), nil
}

// accessResources are the IAM role, the queue and the security groups
// every cluster gets.
func accessResources(o Options, headDoc any, tags []obj, sp int) obj {
	return obj{
		"HeadNodePolicy": obj{"Type": "AWS::IAM::ManagedPolicy", "Properties": obj{
			"Description":    "burst's head-node programs (burst-slurm-conf iam-policy): attach to the head node's role",
			"PolicyDocument": headDoc}},
		"NodeRole": obj{"Type": "AWS::IAM::Role", "Properties": obj{
			"Description": "burst's GPU nodes",
			"AssumeRolePolicyDocument": obj{"Version": "2012-10-17", "Statement": []obj{{
				"Effect": "Allow", "Principal": obj{"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}}},
			"Tags": tags}},
		"NodeInstanceProfile": obj{"Type": "AWS::IAM::InstanceProfile", "Properties": obj{
			"Roles": []any{ref("NodeRole")}}},
		"InterruptionQueue": obj{"Type": "AWS::SQS::Queue", "Properties": obj{
			"MessageRetentionPeriod": 3600, "SqsManagedSseEnabled": true, "Tags": tags}},
		"HeadNodeSecurityGroup": obj{"Type": "AWS::EC2::SecurityGroup", "Properties": obj{
			"GroupDescription": "burst head node: slurmctld and burst-sizer, reached by the nodes",
			"VpcId":            ref("VpcId"), "Tags": tags}},
		"NodeSecurityGroup": obj{"Type": "AWS::EC2::SecurityGroup", "Properties": obj{
			"GroupDescription": "burst GPU nodes: slurmd from the head node, all traffic between nodes (multi-node jobs)",
			"VpcId":            ref("VpcId"), "Tags": tags}},
		"NodesToSlurmctld": ingress("HeadNodeSecurityGroup", "NodeSecurityGroup", o.ControllerPort, "slurmctld from the nodes"),
		"NodesToSizer":     ingress("HeadNodeSecurityGroup", "NodeSecurityGroup", sp, "burst-sizer from the nodes (agent reports, credentials)"),
		"HeadToSlurmd":     ingress("NodeSecurityGroup", "HeadNodeSecurityGroup", o.SlurmdPort, "slurmd from slurmctld"),
		"NodesToNodes": obj{"Type": "AWS::EC2::SecurityGroupIngress", "Properties": obj{
			"GroupId": ref("NodeSecurityGroup"), "SourceSecurityGroupId": ref("NodeSecurityGroup"),
			"IpProtocol": "-1", "Description": "multi-node jobs: srun, MPI, NCCL between the nodes"}},
		// EFA's OS-bypass traffic needs the group to allow all traffic
		// to itself both ways (EC2 User Guide, "Prepare an EFA-enabled
		// security group"), beyond the default egress to 0.0.0.0/0
		"NodesToNodesOut": obj{"Type": "AWS::EC2::SecurityGroupEgress", "Properties": obj{
			"GroupId": ref("NodeSecurityGroup"), "DestinationSecurityGroupId": ref("NodeSecurityGroup"),
			"IpProtocol": "-1", "Description": "EFA between the nodes of a multi-node job"}},
	}
}

// addInterruptionRules adds an EventBridge rule per interruption event
// and the queue policy that lets only those rules send to the queue.
func addInterruptionRules(res obj) {
	var rules []any
	for _, r := range ruleEvents {
		pattern := obj{"source": []string{"aws.ec2"}, "detail-type": []string{r.detailType}}
		if r.detailType == "AWS Health Event" {
			pattern = obj{"source": []string{"aws.health"}, "detail-type": []string{r.detailType},
				"detail": obj{"service": []string{"EC2"}, "eventTypeCategory": []string{"scheduledChange"}}}
		}
		res[r.name] = obj{"Type": "AWS::Events::Rule", "Properties": obj{
			"Description":  "burst: " + r.detailType + " to the interruption queue",
			"EventPattern": pattern,
			"State":        "ENABLED",
			"Targets":      []obj{{"Id": "burst-interruption-queue", "Arn": getAtt("InterruptionQueue", "Arn")}}}}
		rules = append(rules, getAtt(r.name, "Arn"))
	}
	res["InterruptionQueuePolicy"] = obj{"Type": "AWS::SQS::QueuePolicy", "Properties": obj{
		"Queues": []any{ref("InterruptionQueue")},
		"PolicyDocument": obj{"Version": "2012-10-17", "Statement": []obj{{
			"Sid": "BurstEventBridgeRulesOnly", "Effect": "Allow", "Principal": obj{"Service": "events.amazonaws.com"},
			"Action": "sqs:SendMessage", "Resource": getAtt("InterruptionQueue", "Arn"),
			"Condition": obj{"ArnEquals": obj{"aws:SourceArn": rules}}}}}}}
}

// addFSx adds FSx for Lustre, its security group and the checkpoint
// repository on S3.
func addFSx(o Options, tags []obj, params, res, outputs obj) {
	name := func(s string) obj { return obj{"Fn::Sub": "${AWS::StackName}-" + s} }
	params["FSxSubnetId"] = obj{"Type": "AWS::EC2::Subnet::Id", "Description": "the subnet FSx for Lustre lives in (one of network.subnets)"}
	res["FSxSecurityGroup"] = obj{"Type": "AWS::EC2::SecurityGroup", "Properties": obj{
		"GroupDescription": "burst FSx for Lustre: Lustre from the nodes and the head node",
		"VpcId":            ref("VpcId"), "Tags": tags}}
	for _, src := range []string{"NodeSecurityGroup", "HeadNodeSecurityGroup"} {
		res["Lustre988From"+src] = ingress("FSxSecurityGroup", src, 988, "Lustre from "+src)
		p := ingress("FSxSecurityGroup", src, 1018, "Lustre from "+src)
		p["Properties"].(obj)["ToPort"] = 1023
		res["Lustre1018From"+src] = p
	}
	res["FSxLustreSelf"] = obj{"Type": "AWS::EC2::SecurityGroupIngress", "Properties": obj{
		"GroupId": ref("FSxSecurityGroup"), "SourceSecurityGroupId": ref("FSxSecurityGroup"),
		"IpProtocol": "tcp", "FromPort": 988, "ToPort": 1023, "Description": "Lustre between the file servers"}}
	res["FileSystem"] = obj{"Type": "AWS::FSx::FileSystem", "Properties": obj{
		"FileSystemType": "LUSTRE", "StorageCapacity": o.FSxCapacity, "StorageType": "SSD",
		"SubnetIds": []any{ref("FSxSubnetId")}, "SecurityGroupIds": []any{ref("FSxSecurityGroup")},
		"LustreConfiguration": obj{"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125, "DataCompressionType": "LZ4"},
		"Tags":                append([]obj{{"Key": "Name", "Value": name("fsx")}}, tags...)}}
	res["CheckpointRepository"] = obj{"Type": "AWS::FSx::DataRepositoryAssociation", "Properties": obj{
		"FileSystemId": ref("FileSystem"), "FileSystemPath": o.FSxPath, "DataRepositoryPath": o.FSxS3,
		"BatchImportMetaDataOnCreate": true,
		"S3": obj{"AutoImportPolicy": obj{"Events": []string{"NEW", "CHANGED", "DELETED"}},
			"AutoExportPolicy": obj{"Events": []string{"NEW", "CHANGED", "DELETED"}}}}}
	outputs["FSxDnsName"] = obj{"Description": "burst.yaml fsx.dns_name", "Value": getAtt("FileSystem", "DNSName")}
	outputs["FSxMountName"] = obj{"Description": "burst.yaml fsx.mount_name", "Value": getAtt("FileSystem", "LustreMountName")}
}

func ingress(group, source string, port int, what string) obj {
	return obj{"Type": "AWS::EC2::SecurityGroupIngress", "Properties": obj{
		"GroupId": ref(group), "SourceSecurityGroupId": ref(source),
		"IpProtocol": "tcp", "FromPort": port, "ToPort": port, "Description": what}}
}

// substitute turns an iampolicy document into template JSON, replacing
// each string in swap with its intrinsic function and the placeholder
// account in ARNs with ${AWS::AccountId}.
func substitute(doc iampolicy.Document, swap map[string]any) (any, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the IAM policy: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("decoding the IAM policy: %w", err)
	}
	var walk func(any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case map[string]any:
			for k, e := range t {
				t[k] = walk(e)
			}
		case []any:
			for i, e := range t {
				t[i] = walk(e)
			}
		case string:
			if r, ok := swap[t]; ok {
				return r
			}
		}
		return x
	}
	return walk(v), nil
}
