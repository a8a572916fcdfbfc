package ec2

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/burst-hpc/burst/internal/awssdk"
)

// NewSDKClient builds the real aws-sdk-go-v2 EC2 client every burst
// program uses: internal/awssdk's configuration with up to 8 attempts
// (bounded for programs that run inside Slurm's power-saving loop).
func NewSDKClient(ctx context.Context, o awssdk.Options) (*ec2.Client, error) {
	cfg, err := awssdk.Load(ctx, o, 8)
	if err != nil {
		return nil, fmt.Errorf("building the EC2 client: %w", err)
	}
	return ec2.NewFromConfig(cfg, func(eo *ec2.Options) { eo.BaseEndpoint = o.BaseEndpoint() }), nil
}
