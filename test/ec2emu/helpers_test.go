package ec2emu_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/burst-hpc/burst/test/ec2emu"
)

func sqsClient(s *ec2emu.Server) *sqs.Client {
	return sqs.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDSQSTEST", "SECRET", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 1; o.RateLimiter = ratelimit.None })
		},
	}, func(o *sqs.Options) { o.BaseEndpoint = aws.String(s.URL()) })
}

// describe returns one instance through DescribeInstances.
func describe(t *testing.T, c *ec2.Client, id string) types.Instance {
	t.Helper()
	d, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatalf("describing %s: %v", id, err)
	}
	if len(d.Reservations) != 1 || len(d.Reservations[0].Instances) != 1 {
		t.Fatalf("describing %s: %+v", id, d.Reservations)
	}
	return d.Reservations[0].Instances[0]
}

// eventually polls cond (wall clock, bounded) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func imdsClient(t *testing.T, s *ec2emu.Server, id string) *imds.Client {
	t.Helper()
	u, err := s.IMDSURL(id)
	if err != nil {
		t.Fatal(err)
	}
	return imds.New(imds.Options{Endpoint: u, ClientEnableState: imds.ClientEnabled})
}

// imdsGet reads a metadata path (relative to /latest/meta-data/) and
// returns its body, or the HTTP status of the error.
func imdsGet(t *testing.T, cl *imds.Client, p string) (string, int) {
	t.Helper()
	o, err := cl.GetMetadata(context.Background(), &imds.GetMetadataInput{Path: p})
	if err != nil {
		var re interface{ HTTPStatusCode() int }
		if errors.As(err, &re) {
			return "", re.HTTPStatusCode()
		}
		t.Fatalf("%s: %v", p, err)
	}
	defer o.Content.Close()
	b, _ := io.ReadAll(o.Content)
	return string(b), 200
}

func dynamic(t *testing.T, cl *imds.Client, p string) []byte {
	t.Helper()
	o, err := cl.GetDynamicData(context.Background(), &imds.GetDynamicDataInput{Path: p})
	if err != nil {
		t.Fatalf("dynamic/%s: %v", p, err)
	}
	defer o.Content.Close()
	b, err := io.ReadAll(o.Content)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// launch1 runs one instance and returns its id.
func launch1(t *testing.T, c *ec2.Client, spot bool, mut ...func(*ec2.RunInstancesInput)) string {
	t.Helper()
	out, err := run(t, c, 1, spot, mut...)
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.Instances[0].InstanceId)
}
