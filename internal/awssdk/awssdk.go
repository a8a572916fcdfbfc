// Package awssdk is the one place burst loads an aws-sdk-go-v2
// configuration: the region, the default credential chain (or the
// emulator's dummy credentials, test only) and bounded standard retries.
// Each service's client (internal/cloud/ec2, internal/notices) builds on it
// and applies the endpoint override.
package awssdk

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Options say where a service's client talks to and how it signs.
type Options struct {
	Region string
	// Endpoint overrides the service's endpoint ("" for the region's).
	Endpoint string
	// StaticCredentials signs requests with fixed dummy credentials instead
	// of the default credential chain: for the EC2 emulator (which serves
	// SQS too and checks none), so the SDK never probes instance metadata
	// for them. Test only.
	StaticCredentials bool
}

// Load is the SDK configuration for o: the default credential chain unless
// o.StaticCredentials, and standard retries of at most maxAttempts attempts
// with backoff capped at 2 s (callers inside Slurm's power-saving loop must
// not wait long).
func Load(ctx context.Context, o Options, maxAttempts int) (aws.Config, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(o.Region),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = maxAttempts
				so.MaxBackoff = 2 * time.Second
			})
		}),
	}
	if o.StaticCredentials {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("burst-emulator", "burst-emulator", "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return cfg, nil
}

// BaseEndpoint is o.Endpoint as the SDK's service options want it (nil for
// the region's endpoint).
func (o Options) BaseEndpoint() *string {
	if o.Endpoint == "" {
		return nil
	}
	return aws.String(o.Endpoint)
}
