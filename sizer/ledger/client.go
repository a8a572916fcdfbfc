package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// SQSOptions configure NewSQSClient (burst.yaml's cluster.region,
// cluster.sqs_endpoint, cluster.ec2_static_credentials).
type SQSOptions struct {
	Region            string
	Endpoint          string
	StaticCredentials bool
}

// NewSQSClient is the aws-sdk-go-v2 SQS client of the events queue: the
// default credential chain unless StaticCredentials (the emulator's dummy
// ones, test only).
func NewSQSClient(ctx context.Context, o SQSOptions) (*sqs.Client, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(o.Region),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) { so.MaxAttempts = 5; so.MaxBackoff = 2 * time.Second })
		}),
	}
	if o.StaticCredentials {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("burst-emulator", "burst-emulator", "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading AWS configuration for SQS: %w", err)
	}
	return sqs.NewFromConfig(cfg, func(so *sqs.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
	}), nil
}
