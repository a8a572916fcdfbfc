package ec2emu_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/burst-hpc/burst/test/ec2emu"
)

func TestSQSQueuesThroughTheSDK(t *testing.T) {
	s, _ := start(t, ec2emu.Options{})
	q := sqsClient(s)
	ctx := context.Background()
	cq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("burst-events"), Attributes: map[string]string{"VisibilityTimeout": "600"}})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(cq.QueueUrl)
	if !strings.HasSuffix(url, "/123456789012/burst-events") {
		t.Errorf("queue URL %s", url)
	}
	// Creating it again with the same attributes returns it; other attributes conflict.
	if again, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("burst-events"), Attributes: map[string]string{"VisibilityTimeout": "600"}}); err != nil || aws.ToString(again.QueueUrl) != url {
		t.Errorf("re-create: %v %v", again, err)
	}
	var exists *sqstypes.QueueNameExists
	if _, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("burst-events"), Attributes: map[string]string{"VisibilityTimeout": "5"}}); !errors.As(err, &exists) || code(err) != "QueueAlreadyExists" {
		t.Errorf("re-create with other attributes: %v", err)
	}
	gu, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("burst-events")})
	if err != nil || aws.ToString(gu.QueueUrl) != url {
		t.Errorf("GetQueueUrl: %v %v", gu, err)
	}
	var missing *sqstypes.QueueDoesNotExist
	if _, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")}); !errors.As(err, &missing) || code(err) != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("unknown queue: %v (code %q)", err, code(err))
	}
	ga, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{"All"}})
	if err != nil || ga.Attributes["QueueArn"] != "arn:aws:sqs:us-east-1:123456789012:burst-events" || ga.Attributes["VisibilityTimeout"] != "600" || ga.Attributes["ApproximateNumberOfMessages"] != "0" {
		t.Errorf("attributes: %v %v", ga, err)
	}

	sent, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"hello":"world"}`),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("test")}}})
	if err != nil || aws.ToString(sent.MD5OfMessageAttributes) == "" {
		t.Fatalf("SendMessage: %+v %v", sent, err) // the SDK checked MD5OfMessageBody
	}
	r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"All"}})
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("ReceiveMessage: %+v %v", r, err)
	}
	m := r.Messages[0]
	if aws.ToString(m.MessageId) != aws.ToString(sent.MessageId) || aws.ToString(m.Body) != `{"hello":"world"}` ||
		aws.ToString(m.MessageAttributes["kind"].StringValue) != "test" || m.Attributes["ApproximateReceiveCount"] != "1" ||
		m.Attributes["SenderId"] != "AKIDSQSTEST" || aws.ToString(m.MD5OfMessageAttributes) != aws.ToString(sent.MD5OfMessageAttributes) {
		t.Errorf("received %+v", m)
	}
	// In flight for 600 s: a short poll finds nothing.
	if r2, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)}); err != nil || len(r2.Messages) != 0 {
		t.Errorf("in flight yet received: %+v %v", r2, err)
	}
	ga, _ = q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessagesNotVisible"}})
	if ga.Attributes["ApproximateNumberOfMessagesNotVisible"] != "1" || len(ga.Attributes) != 1 {
		t.Errorf("not visible: %v", ga.Attributes)
	}
	// Visible again at once: received again with a new handle.
	if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Fatal(err)
	}
	r, err = q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"ApproximateReceiveCount"}})
	if err != nil || len(r.Messages) != 1 || r.Messages[0].Attributes["ApproximateReceiveCount"] != "2" || aws.ToString(r.Messages[0].ReceiptHandle) == aws.ToString(m.ReceiptHandle) {
		t.Fatalf("second receive: %+v %v", r, err)
	}
	// The old handle deletes nothing; the new one deletes.
	if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Errorf("delete with a stale handle: %v", err)
	}
	if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: r.Messages[0].ReceiptHandle, VisibilityTimeout: 0}); err != nil {
		t.Errorf("the stale delete removed the message: %v", err)
	}
	var bad *sqstypes.ReceiptHandleIsInvalid
	if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("forged")}); !errors.As(err, &bad) {
		t.Errorf("forged handle: %v", err)
	}
	r, _ = q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)})
	if len(r.Messages) != 1 {
		t.Fatalf("third receive: %+v", r)
	}
	db, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{
		{Id: aws.String("a"), ReceiptHandle: r.Messages[0].ReceiptHandle}, {Id: aws.String("b"), ReceiptHandle: aws.String("forged")}}})
	if err != nil || len(db.Successful) != 1 || aws.ToString(db.Successful[0].Id) != "a" || len(db.Failed) != 1 ||
		aws.ToString(db.Failed[0].Code) != "ReceiptHandleIsInvalid" || !db.Failed[0].SenderFault {
		t.Errorf("DeleteMessageBatch: %+v %v", db, err)
	}
	var dup *sqstypes.BatchEntryIdsNotDistinct
	if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{
		{Id: aws.String("a"), ReceiptHandle: aws.String("x")}, {Id: aws.String("a"), ReceiptHandle: aws.String("y")}}}); !errors.As(err, &dup) {
		t.Errorf("duplicate batch ids: %v", err)
	}
	var empty *sqstypes.EmptyBatchRequest
	if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{}}); !errors.As(err, &empty) {
		t.Errorf("empty batch: %v", err)
	}
	if _, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 11}); code(err) != "InvalidParameterValue" {
		t.Errorf("11 messages: %v", err)
	}
	if _, err := q.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); err != nil {
		t.Fatal(err)
	}
	var purging *sqstypes.PurgeQueueInProgress
	if _, err := q.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)}); !errors.As(err, &purging) {
		t.Errorf("second purge within 60 s: %v", err)
	}
	// Recorded as IAM actions, apart from EC2's.
	iam := s.IAMActions()
	for _, a := range []string{"sqs:CreateQueue", "sqs:GetQueueUrl", "sqs:GetQueueAttributes", "sqs:SendMessage", "sqs:ReceiveMessage",
		"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:DeleteMessageBatch", "sqs:PurgeQueue"} {
		if !slices.Contains(iam, a) {
			t.Errorf("IAMActions %v lacks %s", iam, a)
		}
	}
	if len(s.Actions()) != 0 {
		t.Errorf("Actions (EC2) = %v", s.Actions())
	}
}

func TestSQSLongPollWaitsForAMessage(t *testing.T) {
	s, _ := start(t, ec2emu.Options{TimeScale: 10}) // 20 s of long poll are 2 s here
	q := sqsClient(s)
	ctx := context.Background()
	cq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q")})
	if err != nil {
		t.Fatal(err)
	}
	url := cq.QueueUrl
	empty, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, WaitTimeSeconds: 1})
	if err != nil || len(empty.Messages) != 0 {
		t.Fatalf("empty long poll: %+v %v", empty, err)
	}
	got := make(chan *sqs.ReceiveMessageOutput, 1)
	go func() {
		r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, WaitTimeSeconds: 20})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	time.Sleep(100 * time.Millisecond) // usually lets the poll start waiting first; either order must work
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("m")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r == nil || len(r.Messages) != 1 || aws.ToString(r.Messages[0].Body) != "m" {
			t.Errorf("long poll got %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll never returned")
	}
	// A delayed message: the poll waits out the delay and then gets it.
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("later"), DelaySeconds: 5}); err != nil {
		t.Fatal(err)
	}
	r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, WaitTimeSeconds: 20,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"SentTimestamp", "ApproximateFirstReceiveTimestamp"}})
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("delayed message: %+v %v", r, err)
	}
	sentAt, _ := strconv.ParseInt(r.Messages[0].Attributes["SentTimestamp"], 10, 64)
	firstAt, _ := strconv.ParseInt(r.Messages[0].Attributes["ApproximateFirstReceiveTimestamp"], 10, 64)
	if firstAt-sentAt < 5000 {
		t.Errorf("a message delayed 5 s was received after %d ms", firstAt-sentAt)
	}
	if _, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, WaitTimeSeconds: 21}); code(err) != "InvalidParameterValue" {
		t.Errorf("wait 21 s: %v", err)
	}
}

func TestSQSVisibilityTimeoutExpires(t *testing.T) {
	s, _ := start(t, ec2emu.Options{TimeScale: 1000})
	q := sqsClient(s)
	ctx := context.Background()
	cq, _ := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q"), Attributes: map[string]string{"VisibilityTimeout": "1"}})
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: cq.QueueUrl, MessageBody: aws.String("again")}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: cq.QueueUrl, WaitTimeSeconds: 20, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		if err != nil || len(r.Messages) != 1 || r.Messages[0].Attributes["ApproximateReceiveCount"] != string(rune('0'+i)) {
			t.Fatalf("receive %d: %+v %v", i, r, err)
		}
	}
}

func TestSQSFaultsAndAuth(t *testing.T) {
	s, _ := start(t, ec2emu.Options{})
	q := sqsClient(s)
	ctx := context.Background()
	s.InjectFault(ec2emu.Fault{Service: "sqs", Action: "ReceiveMessage", Code: "RequestThrottled", Count: 1})
	cq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q")})
	if err != nil {
		t.Fatal(err)
	}
	var throttled *sqstypes.RequestThrottled
	if _, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: cq.QueueUrl}); !errors.As(err, &throttled) {
		t.Errorf("injected fault: %v", err)
	}
	if _, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: cq.QueueUrl}); err != nil {
		t.Errorf("after the fault: %v", err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL(), strings.NewReader(`{"QueueName":"q"}`))
	req.Header.Set("X-Amz-Target", "AmazonSQS.GetQueueUrl")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.HasPrefix(resp.Header.Get("X-Amzn-Query-Error"), "MissingAuthenticationToken;") {
		t.Errorf("unsigned SQS request: %d %q", resp.StatusCode, resp.Header.Get("X-Amzn-Query-Error"))
	}
}

// MD5OfMessageAttributes matches the digest AWS returns for the same
// attribute (the vector moto and LocalStack pin from AWS).
func TestSQSMessageAttributeDigestMatchesAWS(t *testing.T) {
	s, _ := start(t, ec2emu.Options{})
	q := sqsClient(s)
	ctx := context.Background()
	cq, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q")})
	if err != nil {
		t.Fatal(err)
	}
	for value, want := range map[string]string{"1493147359900": "235c5c510d26fb653d073faed50ae77c", "1493147359901": "994258b45346a2cc3f9cbb611aa7af30"} {
		out, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: cq.QueueUrl, MessageBody: aws.String("derp"),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"timestamp": {DataType: aws.String("Number"), StringValue: aws.String(value)}}})
		if err != nil || aws.ToString(out.MD5OfMessageAttributes) != want || aws.ToString(out.MD5OfMessageBody) != "58fd9edd83341c29f1aebba81c31e257" {
			t.Errorf("timestamp=%s: %+v %v, want attributes digest %s", value, out, err, want)
		}
	}
}
