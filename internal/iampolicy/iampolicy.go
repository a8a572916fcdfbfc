// Package iampolicy renders the least-privilege IAM policy for burst's EC2
// calls: exactly the actions internal/cloud/ec2 makes (Actions), plus the
// permissions EC2 checks inside those calls (Implied), scoped by the
// cluster tag wherever EC2 supports tag conditions:
//
//   - CreateFleet/RunInstances may create instances and fleets only when the
//     request tags them with the cluster tag (aws:RequestTag), and launch only
//     from launch templates carrying it (aws:ResourceTag);
//   - CreateTags is allowed as part of a launch (ec2:CreateAction), and
//     afterwards only to give a fleet instance of this cluster its
//     burst:node tag when it has none yet (aws:TagKeys, and the Null
//     condition on aws:ResourceTag/burst:node), so burst can never re-tag a
//     named instance or any other resource;
//   - TerminateInstances only on instances carrying the cluster tag;
//   - CreateLaunchTemplate only with the cluster tag;
//   - CreatePlacementGroup (the cluster placement group of multi-node EFA
//     launches) only with the cluster tag;
//   - the Describe* calls have no resource-level permissions in EC2, so
//     they are limited to the region (aws:RequestedRegion) when one is given;
//   - with an interruption queue (burst.yaml interruptions.queue_url),
//     burst-sizer's reader of EC2's EventBridge events gets exactly the SQS
//     actions it calls (SQSActions) on that one queue's ARN.
//
// An admin-made launch template must carry the cluster tag, and any
// volume or network-interface tags it sets must include it too.
//
// BuildNode is the node role's policy: GetSecretValue on the one munge
// secret and nothing else. Nodes need no EC2 rights: the dead-man switch
// powers the node off, and burst launches with
// InstanceInitiatedShutdownBehavior=terminate.
package iampolicy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Actions are the EC2 API actions burst calls; the emulator's recorded
// actions for a full provider flow are exactly these.
var Actions = []string{
	"ec2:CreateFleet",
	"ec2:CreateLaunchTemplate",
	"ec2:CreatePlacementGroup",
	"ec2:CreateTags",
	"ec2:DescribeCapacityReservations",
	"ec2:DescribeInstanceStatus",
	"ec2:DescribeInstanceTypes",
	"ec2:DescribeInstances",
	"ec2:DescribeLaunchTemplates",
	"ec2:DescribeSpotPriceHistory",
	"ec2:RunInstances",
	"ec2:TerminateInstances",
}

// SQSActions are the SQS API actions burst-sizer's interruption-queue
// reader calls (internal/notices); the emulator's record of it is exactly
// these.
var SQSActions = []string{
	"sqs:DeleteMessage",
	"sqs:ReceiveMessage",
}

// Implied are permissions that EC2 checks during those calls although burst
// never calls them as API actions, with the reason.
var Implied = map[string]string{
	"ec2:RunInstances": "CreateFleet launches through RunInstances and checks this permission on every resource it uses (burst also calls it to launch into a capacity reservation)",
	"ec2:CreateTags":   "tags given at launch (TagSpecifications) need ec2:CreateTags on the new resources (besides the direct call that names fleet instances)",
	"iam:PassRole":     "the launch template's instance profile passes its role to EC2 (only when Options.PassRoleARN is set)",
}

// Options refine the policy.
type Options struct {
	Region      string // e.g. "us-east-1"; "" = any region
	Partition   string // default "aws"
	Account     string // account id; "" = any ("*")
	PassRoleARN string // role of the nodes' instance profile; "" omits iam:PassRole
	// InterruptionQueueARN is the SQS queue EventBridge delivers EC2's
	// interruption events to; "" omits the SQS statement.
	InterruptionQueueARN string
}

// Statement is one IAM policy statement.
type Statement struct {
	Sid       string                    `json:"Sid"`
	Effect    string                    `json:"Effect"`
	Action    []string                  `json:"Action"`
	Resource  []string                  `json:"Resource"`
	Condition map[string]map[string]any `json:"Condition,omitempty"`
}

// Document is an IAM policy document.
type Document struct {
	Version   string      `json:"Version"`
	Statement []Statement `json:"Statement"`
}

var (
	tagKeyRe   = regexp.MustCompile(`^[\p{L}\p{N} +\-=._:@]{1,128}$`)
	queueARNRe = regexp.MustCompile(`^arn:aws(-[a-z]+)*:sqs:([a-z]{2}(-[a-z]+)+-\d):(\d{12}):[A-Za-z0-9_-]{1,80}$`)
	regionRe   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
	accountRe  = regexp.MustCompile(`^\d{12}$`)
)

// Render returns the policy JSON for a cluster whose resources carry the
// tag clusterTagKey=clusterName.
func Render(clusterTagKey, clusterName string, opts Options) ([]byte, error) {
	doc, err := Build(clusterTagKey, clusterName, opts)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the IAM policy: %w", err)
	}
	return append(b, '\n'), nil
}

// Build returns the policy as a Document.
func Build(clusterTagKey, clusterName string, opts Options) (Document, error) {
	if probs := opts.problems(clusterTagKey, clusterName); len(probs) > 0 {
		return Document{}, fmt.Errorf("rendering the IAM policy: %s", strings.Join(probs, "; "))
	}
	part, region, account := opts.Partition, opts.Region, opts.Account
	if part == "" {
		part = "aws"
	}
	if region == "" {
		region = "*"
	}
	if account == "" {
		account = "*"
	}
	arn := func(kinds ...string) []string {
		out := make([]string, len(kinds))
		for i, k := range kinds {
			acct := account
			if k == "image" || k == "snapshot" {
				acct = "" // public and shared AMIs have no owner in their ARN
			}
			out[i] = fmt.Sprintf("arn:%s:ec2:%s:%s:%s/*", part, region, acct, k)
		}
		return out
	}
	request := map[string]map[string]any{"StringEquals": {"aws:RequestTag/" + clusterTagKey: clusterName}}
	resource := map[string]map[string]any{"StringEquals": {"aws:ResourceTag/" + clusterTagKey: clusterName}}
	launch := []string{"ec2:CreateFleet", "ec2:RunInstances"}
	doc := Document{Version: "2012-10-17", Statement: []Statement{
		{Sid: "BurstLaunchTaggedInstances", Effect: "Allow", Action: launch,
			Resource: arn("fleet", "instance"), Condition: request},
		{Sid: "BurstLaunchFromClusterTemplates", Effect: "Allow", Action: launch,
			Resource: arn("launch-template"), Condition: resource},
		{Sid: "BurstLaunchSupportingResources", Effect: "Allow", Action: launch,
			Resource: arn("image", "snapshot", "subnet", "security-group", "volume", "network-interface", "key-pair", "placement-group", "spot-instances-request", "capacity-reservation")},
		{Sid: "BurstTagOnlyAtLaunch", Effect: "Allow", Action: []string{"ec2:CreateTags"},
			Resource: arn("fleet", "instance", "launch-template", "volume", "network-interface", "placement-group"),
			Condition: map[string]map[string]any{
				"StringEquals": {"aws:RequestTag/" + clusterTagKey: clusterName, "ec2:CreateAction": []string{"CreateFleet", "CreateLaunchTemplate", "CreatePlacementGroup", "RunInstances"}},
			}},
		{Sid: "BurstNameFleetInstances", Effect: "Allow", Action: []string{"ec2:CreateTags"},
			Resource: arn("instance"),
			Condition: map[string]map[string]any{
				"StringEquals":              {"aws:ResourceTag/" + clusterTagKey: clusterName},
				"ForAllValues:StringEquals": {"aws:TagKeys": []string{nodeTagKey}},
				"Null":                      {"aws:ResourceTag/" + nodeTagKey: "true"},
			}},
		{Sid: "BurstCreateClusterLaunchTemplates", Effect: "Allow", Action: []string{"ec2:CreateLaunchTemplate"},
			Resource: arn("launch-template"), Condition: request},
		{Sid: "BurstCreateClusterPlacementGroups", Effect: "Allow", Action: []string{"ec2:CreatePlacementGroup"},
			Resource: arn("placement-group"), Condition: request},
		{Sid: "BurstTerminateClusterInstances", Effect: "Allow", Action: []string{"ec2:TerminateInstances"},
			Resource: arn("instance"), Condition: resource},
		{Sid: "BurstReadOnly", Effect: "Allow",
			Action: []string{"ec2:DescribeCapacityReservations", "ec2:DescribeInstanceStatus", "ec2:DescribeInstanceTypes", "ec2:DescribeInstances",
				"ec2:DescribeLaunchTemplates", "ec2:DescribeSpotPriceHistory"},
			Resource: []string{"*"}},
	}}
	if opts.Region != "" {
		doc.Statement[len(doc.Statement)-1].Condition = map[string]map[string]any{"StringEquals": {"aws:RequestedRegion": opts.Region}}
	}
	if opts.InterruptionQueueARN != "" {
		doc.Statement = append(doc.Statement, Statement{Sid: "BurstReadInterruptionQueue", Effect: "Allow",
			Action: append([]string(nil), SQSActions...), Resource: []string{opts.InterruptionQueueARN}})
	}
	if opts.PassRoleARN != "" {
		doc.Statement = append(doc.Statement, Statement{Sid: "BurstPassNodeRole", Effect: "Allow", Action: []string{"iam:PassRole"},
			Resource: []string{opts.PassRoleARN}, Condition: map[string]map[string]any{"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}})
	}
	return doc, nil
}

// problems lists every input Build refuses.
func (opts Options) problems(clusterTagKey, clusterName string) []string {
	var probs []string
	if !tagKeyRe.MatchString(clusterTagKey) || strings.HasPrefix(clusterTagKey, "aws:") {
		probs = append(probs, fmt.Sprintf("cluster tag key %q is not a valid EC2 tag key (1-128 letters, digits, spaces and + - = . _ : @; not aws:)", clusterTagKey))
	}
	if clusterName == "" || len(clusterName) > 256 {
		probs = append(probs, "cluster name must be 1-256 characters")
	}
	if opts.Region != "" && !regionRe.MatchString(opts.Region) {
		probs = append(probs, fmt.Sprintf("region %q is not an AWS region name such as us-east-1", opts.Region))
	}
	if opts.Account != "" && !accountRe.MatchString(opts.Account) {
		probs = append(probs, fmt.Sprintf("account %q is not a 12-digit AWS account id", opts.Account))
	}
	if opts.PassRoleARN != "" && !strings.HasPrefix(opts.PassRoleARN, "arn:") {
		probs = append(probs, fmt.Sprintf("pass-role ARN %q does not start with arn:", opts.PassRoleARN))
	}
	if q := opts.InterruptionQueueARN; q != "" {
		m := queueARNRe.FindStringSubmatch(q)
		switch {
		case m == nil:
			probs = append(probs, fmt.Sprintf("interruption queue ARN %q is not arn:aws:sqs:REGION:ACCOUNT:NAME", q))
		case opts.Region != "" && m[2] != opts.Region:
			probs = append(probs, fmt.Sprintf("interruption queue %s is not in region %s", q, opts.Region))
		case opts.Account != "" && m[4] != opts.Account:
			probs = append(probs, fmt.Sprintf("interruption queue %s is not in account %s", q, opts.Account))
		}
	}
	return probs
}

// nodeTagKey is the tag that names an instance's Slurm node.
const nodeTagKey = "burst:node"

var secretARNRe = regexp.MustCompile(`^arn:aws(-[a-z]+)*:secretsmanager:[a-z]{2}(-[a-z]+)+-[0-9]:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]{1,512}$`)

// NodeOptions refine the node role's policy.
type NodeOptions struct {
	// KMSKeyARN is the customer-managed KMS key the munge secret is
	// encrypted with; "" for the AWS-managed key (no grant needed).
	KMSKeyARN string
}

// BuildNode returns the node role's policy: read the one munge secret.
func BuildNode(mungeSecretARN string, o NodeOptions) (Document, error) {
	if !secretARNRe.MatchString(mungeSecretARN) {
		return Document{}, fmt.Errorf("rendering the node policy: slurm.munge_key_source %q is not a Secrets Manager secret ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME); the node policy grants exactly that secret", mungeSecretARN)
	}
	doc := Document{Version: "2012-10-17", Statement: []Statement{
		{Sid: "BurstNodeMungeKey", Effect: "Allow", Action: []string{"secretsmanager:GetSecretValue"}, Resource: []string{mungeSecretARN}},
	}}
	if o.KMSKeyARN != "" {
		if !strings.HasPrefix(o.KMSKeyARN, "arn:") || !strings.Contains(o.KMSKeyARN, ":kms:") {
			return Document{}, fmt.Errorf("rendering the node policy: %q is not a KMS key ARN", o.KMSKeyARN)
		}
		region := strings.Split(mungeSecretARN, ":")[3]
		doc.Statement = append(doc.Statement, Statement{Sid: "BurstNodeMungeKeyDecrypt", Effect: "Allow", Action: []string{"kms:Decrypt"},
			Resource: []string{o.KMSKeyARN}, Condition: map[string]map[string]any{"StringEquals": {"kms:ViaService": "secretsmanager." + region + ".amazonaws.com"}}})
	}
	return doc, nil
}

// RenderNode is BuildNode as JSON.
func RenderNode(mungeSecretARN string, o NodeOptions) ([]byte, error) {
	doc, err := BuildNode(mungeSecretARN, o)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
