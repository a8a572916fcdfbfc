package ec2

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// NewSDKClient builds the real aws-sdk-go-v2 EC2 client every burst
// program uses: the default credential chain, and retries bounded for
// programs that run inside Slurm's power-saving loop. An http:// endpoint is
// the built-in emulator, which needs no credentials; static ones are used so
// the SDK never probes instance metadata for them.
func NewSDKClient(ctx context.Context, region, endpoint string) (*ec2.Client, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(region),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 8
				o.MaxBackoff = 2 * time.Second
			})
		}),
	}
	if strings.HasPrefix(endpoint, "http://") {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("burst-emulator", "burst-emulator", "")))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}
