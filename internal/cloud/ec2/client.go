package ec2

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// SDKOptions configure NewSDKClient.
type SDKOptions struct {
	Region string
	// Endpoint overrides the EC2 API endpoint ("" for the region's).
	Endpoint string
	// StaticCredentials signs requests with fixed dummy credentials instead
	// of the default credential chain: for an EC2 emulator, which checks
	// none, so the SDK never probes instance metadata for them. Test only.
	StaticCredentials bool
}

// NewSDKClient builds the real aws-sdk-go-v2 EC2 client every burst
// program uses: the default credential chain (unless o.StaticCredentials),
// and retries bounded for programs that run inside Slurm's power-saving
// loop.
func NewSDKClient(ctx context.Context, o SDKOptions) (*ec2.Client, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(o.Region),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = 8
				so.MaxBackoff = 2 * time.Second
			})
		}),
	}
	if o.StaticCredentials {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("burst-emulator", "burst-emulator", "")))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return ec2.NewFromConfig(awsCfg, func(eo *ec2.Options) {
		if o.Endpoint != "" {
			eo.BaseEndpoint = aws.String(o.Endpoint)
		}
	}), nil
}
