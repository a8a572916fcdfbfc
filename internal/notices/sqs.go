package notices

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/burst-hpc/burst/internal/awssdk"
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

// NewSQSClient builds the aws-sdk-go-v2 SQS client: internal/awssdk's
// configuration (the head node's instance role unless o.StaticCredentials)
// with up to 4 attempts.
func NewSQSClient(ctx context.Context, o awssdk.Options) (*sqs.Client, error) {
	cfg, err := awssdk.Load(ctx, o, 4)
	if err != nil {
		return nil, fmt.Errorf("building the SQS client: %w", err)
	}
	return sqs.NewFromConfig(cfg, func(so *sqs.Options) { so.BaseEndpoint = o.BaseEndpoint() }), nil
}
