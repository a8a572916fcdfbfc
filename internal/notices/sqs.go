package notices

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

// SQS is the part of the aws-sdk-go-v2 SQS client the consumer uses (with
// the SDK's signatures): exactly the two actions the IAM policy grants on
// the one queue (internal/iampolicy).
type SQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Actions are the SQS API actions the consumer calls, as IAM names them.
var Actions = []string{"sqs:DeleteMessage", "sqs:ReceiveMessage"}

// SDKOptions configure NewSQSClient.
type SDKOptions struct {
	Region string
	// Endpoint overrides the SQS endpoint ("" for the region's).
	Endpoint string
	// StaticCredentials signs with fixed dummy credentials (the EC2
	// emulator, which serves SQS too and checks none). Test only.
	StaticCredentials bool
}

// NewSQSClient builds the aws-sdk-go-v2 SQS client: the default credential
// chain (the head node's instance role) unless o.StaticCredentials.
func NewSQSClient(ctx context.Context, o SDKOptions) (*sqs.Client, error) {
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(o.Region),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) { so.MaxAttempts = 4; so.MaxBackoff = 2 * time.Second })
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
