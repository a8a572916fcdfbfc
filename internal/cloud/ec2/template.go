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
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %q %q", p.opts.ImageID, p.opts.InstanceProfile, p.opts.SecurityGroupIDs, p.opts.UserData)
	sum := hex.EncodeToString(h.Sum(nil))
	name := "burst-" + p.opts.Cluster + "-" + sum[:12]
	_, err := p.api.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err == nil {
		p.lt = name
		return name, nil
	}
	if !cloud.IsNotFound(wrapErr(err, "", nil)) {
		return "", wrapErr(err, "looking up launch template "+name, nil)
	}
	data := &types.RequestLaunchTemplateData{
		ImageId: aws.String(p.opts.ImageID),
		MetadataOptions: &types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpTokens:           types.LaunchTemplateHttpTokensStateRequired,
			HttpEndpoint:         types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
			InstanceMetadataTags: types.LaunchTemplateInstanceMetadataTagsStateEnabled,
		},
		SecurityGroupIds: p.opts.SecurityGroupIDs,
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
	if p.opts.UserData != "" {
		data.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(p.opts.UserData)))
	}
	_, err = p.api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
		ClientToken:        aws.String(sum[:32]),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeLaunchTemplate,
			Tags: []types.Tag{{Key: aws.String(TagCluster), Value: aws.String(p.opts.Cluster)}}}},
	})
	var api interface{ ErrorCode() string }
	if err != nil && !(errors.As(err, &api) && api.ErrorCode() == "InvalidLaunchTemplateName.AlreadyExistsException") {
		return "", wrapErr(err, "creating launch template "+name, nil)
	}
	p.log.Info("ensured launch template", "name", name, "image", p.opts.ImageID)
	p.lt = name
	return name, nil
}
