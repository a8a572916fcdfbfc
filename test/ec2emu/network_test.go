package ec2emu_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/burst-hpc/burst/test/ec2emu"
)

// TestDryRunAndDeny: a DryRun call of a permitted action is
// DryRunOperation and does nothing; a denied action is
// UnauthorizedOperation with or without DryRun, as EC2 answers.
func TestDryRunAndDeny(t *testing.T) {
	s, c := start(t, ec2emu.Options{})
	ctx := context.Background()
	run := &ec2.RunInstancesInput{DryRun: aws.Bool(true), ImageId: aws.String("ami-1"), InstanceType: "g6.xlarge", MinCount: aws.Int32(1), MaxCount: aws.Int32(1), SubnetId: aws.String("subnet-a")}
	if _, err := c.RunInstances(ctx, run); code(err) != "DryRunOperation" {
		t.Fatalf("DryRun RunInstances: %v, want DryRunOperation", err)
	}
	if out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil || len(out.Reservations) != 0 {
		t.Fatalf("a DryRun launched something: %+v %v", out, err)
	}
	s.Deny("RunInstances", "TerminateInstances")
	if _, err := c.RunInstances(ctx, run); code(err) != "UnauthorizedOperation" {
		t.Errorf("denied DryRun RunInstances: %v, want UnauthorizedOperation", err)
	}
	run.DryRun = nil
	if _, err := c.RunInstances(ctx, run); code(err) != "UnauthorizedOperation" {
		t.Errorf("denied RunInstances: %v, want UnauthorizedOperation", err)
	}
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{DryRun: aws.Bool(true)}); code(err) != "DryRunOperation" {
		t.Errorf("DryRun DescribeInstances (not denied): %v", err)
	}
	s.Allow("RunInstances")
	if _, err := c.RunInstances(ctx, run); err != nil {
		t.Errorf("RunInstances after Allow: %v", err)
	}
}

func TestNetworkDescribes(t *testing.T) {
	_, c := start(t, ec2emu.Options{SecurityGroups: []string{"sg-1"}, Images: []string{"ami-1"}})
	ctx := context.Background()
	sn, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-b"}})
	if err != nil || len(sn.Subnets) != 1 || aws.ToString(sn.Subnets[0].AvailabilityZone) != "us-east-1b" {
		t.Errorf("DescribeSubnets subnet-b: %+v %v", sn, err)
	}
	if _, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-zz"}}); code(err) != "InvalidSubnetID.NotFound" {
		t.Errorf("missing subnet: %v", err)
	}
	sg, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-1"}})
	if err != nil || len(sg.SecurityGroups) != 1 || aws.ToString(sg.SecurityGroups[0].GroupId) != "sg-1" {
		t.Errorf("DescribeSecurityGroups: %+v %v", sg, err)
	}
	if _, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-2"}}); code(err) != "InvalidGroup.NotFound" {
		t.Errorf("missing group: %v", err)
	}
	im, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-1"}})
	if err != nil || len(im.Images) != 1 || aws.ToString(im.Images[0].ImageId) != "ami-1" {
		t.Errorf("DescribeImages: %+v %v", im, err)
	}
	if _, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{"ami-2"}}); code(err) != "InvalidAMIID.NotFound" {
		t.Errorf("missing image: %v", err)
	}
}
