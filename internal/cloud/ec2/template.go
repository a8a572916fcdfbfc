package ec2

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/cloud"
)

// templateRevision changes whenever the settings of ensured templates do.
const templateRevision = "r2-imds-hop1-shutdown-terminate"

// launchTemplate returns the template to launch from, ensuring it in AMI mode.
func (p *Provider) launchTemplate(ctx context.Context) (string, error) {
	if p.opts.LaunchTemplateName != "" {
		return p.opts.LaunchTemplateName, nil
	}
	p.ltMu.Lock()
	defer p.ltMu.Unlock()
	if p.lt != "" {
		return p.lt, nil
	}
	name, err := p.ensureTemplate(ctx, 0)
	if err != nil {
		return "", err
	}
	p.lt = name
	return name, nil
}

// ensureTemplate finds or creates the launch template of the provider's
// settings, with efa EFA interfaces (one per network card, efa.go) in
// place of the instance-level security groups when efa > 0. p.ltMu is held.
func (p *Provider) ensureTemplate(ctx context.Context, efa int) (string, error) {
	h := sha256.New()
	// templateRevision is in the name: a template made by an older burst
	// (without the hop limit and shutdown behaviour) is never reused
	fmt.Fprintf(h, "%s %q %q %q %q", templateRevision, p.opts.ImageID, p.opts.InstanceProfile, p.opts.SecurityGroupIDs, p.opts.UserData)
	sum := hex.EncodeToString(h.Sum(nil))
	name := "burst-" + p.opts.Cluster + "-" + sum[:12]
	if efa > 0 {
		name += fmt.Sprintf("-efa%d", efa)
	}
	// EC2's client tokens are per account and region: the token is the
	// name's, so another cluster's template of the same settings never
	// shares it (IdempotentParameterMismatch)
	ts := sha256.Sum256([]byte(name))
	token := hex.EncodeToString(ts[:])[:32]
	_, err := p.api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err == nil {
		return name, nil
	}
	if !cloud.IsNotFound(wrapErr(err, "", nil)) {
		return "", wrapErr(err, "looking up launch template "+name, nil)
	}
	data := &types.RequestLaunchTemplateData{
		ImageId: aws.String(p.opts.ImageID),
		// IMDSv2 only, and a hop limit of 1: a token never leaves the
		// instance (a container or a forwarding hop cannot use it); the
		// node's firewall closes IMDS to every user but root.
		MetadataOptions: &types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpTokens:              types.LaunchTemplateHttpTokensStateRequired,
			HttpEndpoint:            types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
			HttpPutResponseHopLimit: aws.Int32(1),
			InstanceMetadataTags:    types.LaunchTemplateInstanceMetadataTagsStateEnabled,
		},
		// the dead-man switch powers the node off: that terminates it, so
		// nodes need no EC2 rights
		InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
		SecurityGroupIds:                  p.opts.SecurityGroupIDs,
		TagSpecifications: []types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}},
			{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}},
		},
	}
	if pr := p.opts.InstanceProfile; pr != "" {
		if strings.HasPrefix(pr, "arn:") {
			data.IamInstanceProfile = &types.LaunchTemplateIamInstanceProfileSpecificationRequest{Arn: aws.String(pr)}
		} else {
			data.IamInstanceProfile = &types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(pr)}
		}
	}
	if efa > 0 {
		// EC2 takes security groups on each interface or on the
		// instance, never both
		data.NetworkInterfaces, data.SecurityGroupIds = efaInterfaces(efa, p.opts.SecurityGroupIDs), nil
	}
	if p.opts.UserData != "" {
		data.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(p.opts.UserData)))
	}
	_, err = p.api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
		ClientToken:        aws.String(token),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeLaunchTemplate,
			Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}}},
	})
	var api interface{ ErrorCode() string }
	if err != nil && !(errors.As(err, &api) && api.ErrorCode() == "InvalidLaunchTemplateName.AlreadyExistsException") {
		return "", wrapErr(err, "creating launch template "+name, nil)
	}
	p.log.Info("ensured launch template", "name", name, "image", p.opts.ImageID, "efa_interfaces", efa)
	return name, nil
}
