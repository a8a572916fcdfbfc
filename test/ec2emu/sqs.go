package ec2emu

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The SQS endpoint speaks what aws-sdk-go-v2/service/sqs sends: the AWS
// JSON 1.0 protocol with the awsQueryCompatible trait. Requests are POSTs
// (any path) with X-Amz-Target: AmazonSQS.<Action>, Content-Type
// application/x-amz-json-1.0 and a JSON body; responses are JSON; errors
// are 400 with {"__type": "com.amazonaws.sqs#<Shape>", "message": ...}
// and the x-amzn-query-error header "<query code>;Sender", from which the
// SDK takes ErrorCode() (e.g. "AWS.SimpleQueueService.NonExistentQueue" for
// QueueDoesNotExist). The older Query protocol (Action=... forms) is not
// served.
const sqsTargetPrefix = "AmazonSQS."

type sqsError struct {
	Type    string // shape name, e.g. "QueueDoesNotExist"
	Query   string // awsQueryError code
	Status  int
	Message string
}

// sqsQueryCodes are the awsQueryError codes of SQS's modelled errors
// (service/sqs schemas); shapes not listed use their own name.
var sqsQueryCodes = map[string]string{
	"BatchEntryIdsNotDistinct":     "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
	"EmptyBatchRequest":            "AWS.SimpleQueueService.EmptyBatchRequest",
	"InvalidBatchEntryId":          "AWS.SimpleQueueService.InvalidBatchEntryId",
	"MessageNotInflight":           "AWS.SimpleQueueService.MessageNotInflight",
	"PurgeQueueInProgress":         "AWS.SimpleQueueService.PurgeQueueInProgress",
	"QueueDeletedRecently":         "AWS.SimpleQueueService.QueueDeletedRecently",
	"QueueDoesNotExist":            "AWS.SimpleQueueService.NonExistentQueue",
	"QueueNameExists":              "QueueAlreadyExists",
	"TooManyEntriesInBatchRequest": "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
	"UnsupportedOperation":         "AWS.SimpleQueueService.UnsupportedOperation",
}

func sqsErr(typ, format string, a ...any) *sqsError {
	q := sqsQueryCodes[typ]
	if q == "" {
		q = typ
	}
	return &sqsError{Type: typ, Query: q, Status: 400, Message: fmt.Sprintf(format, a...)}
}

// sqsValidation is a request that fails validation: SQS answers with a
// ValidationException whose query code is the classic one.
func sqsValidation(query, format string, a ...any) *sqsError {
	return &sqsError{Type: "ValidationException", Query: query, Status: 400, Message: fmt.Sprintf(format, a...)}
}

func sqsInvalidParam(format string, a ...any) *sqsError {
	return sqsValidation("InvalidParameterValue", format, a...)
}

func sqsInvalidAttrName(format string, a ...any) *sqsError {
	return sqsErr("InvalidAttributeName", format, a...)
}

func sqsInvalidAttrValue(format string, a ...any) *sqsError {
	return sqsErr("InvalidAttributeValue", format, a...)
}

func writeSQSError(w http.ResponseWriter, reqID string, e *sqsError) {
	ns := "com.amazonaws.sqs#"
	if e.Type == "ValidationException" {
		ns = "com.amazon.coral.validate#"
	}
	fault := "Sender"
	if e.Status >= 500 {
		fault = "Receiver"
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", reqID)
	w.Header().Set("X-Amzn-Query-Error", e.Query+";"+fault)
	w.WriteHeader(e.Status)
	b, _ := json.Marshal(map[string]string{"__type": ns + e.Type, "message": e.Message})
	_, _ = w.Write(b)
}

// sqsRequest holds the members of every emulated action's input.
type sqsRequest struct {
	QueueName                   string
	QueueUrl                    string
	QueueNamePrefix             string
	Attributes                  map[string]string
	Tags                        map[string]string `json:"tags"`
	AttributeNames              []string
	MessageSystemAttributeNames []string
	MessageAttributeNames       []string
	MaxNumberOfMessages         *int
	MaxResults                  *int
	NextToken                   string
	VisibilityTimeout           *int
	WaitTimeSeconds             *int
	DelaySeconds                *int
	ReceiptHandle               string
	MessageBody                 *string
	MessageAttributes           map[string]msgAttr
	Entries                     []struct {
		Id            string
		ReceiptHandle string
	}
}

type sqsHandler func(sq *sqsService, r *sqsRequest, sender string) (any, *sqsError)

var sqsHandlers = map[string]sqsHandler{
	"CreateQueue":             (*sqsService).createQueue,
	"GetQueueUrl":             (*sqsService).getQueueURL,
	"GetQueueAttributes":      (*sqsService).getQueueAttributes,
	"SetQueueAttributes":      (*sqsService).setQueueAttributes,
	"ListQueues":              (*sqsService).listQueues,
	"DeleteQueue":             (*sqsService).deleteQueue,
	"SendMessage":             (*sqsService).sendMessage,
	"DeleteMessage":           (*sqsService).deleteMessage,
	"DeleteMessageBatch":      (*sqsService).deleteMessageBatch,
	"ChangeMessageVisibility": (*sqsService).changeMessageVisibility,
	"PurgeQueue":              (*sqsService).purgeQueue,
	"ReceiveMessage":          nil, // long polls outside the lock: serveSQS
}

var accessKey = regexp.MustCompile(`Credential=([A-Z0-9a-z]+)/`)

func (s *Server) serveSQS(w http.ResponseWriter, r *http.Request) {
	reqID := newUUID()
	action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), sqsTargetPrefix)
	body, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	var req sqsRequest
	var serr *sqsError
	switch _, known := sqsHandlers[action]; {
	case r.Method != http.MethodPost:
		serr = sqsValidation("InvalidAction", "SQS JSON requests are POSTs, got %s", r.Method)
	case err != nil:
		serr = sqsValidation("InvalidParameterValue", "reading the request: %v", err)
	case r.Header.Get("Authorization") == "":
		serr = &sqsError{Type: "MissingAuthenticationTokenException", Query: "MissingAuthenticationToken", Status: 403, Message: "Request is missing Authentication Token"}
	case !known:
		serr = sqsValidation("InvalidAction", "The action %s is not valid for this endpoint (the emulator serves %s).", action, strings.Join(sqsActionNames(), ", "))
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-amz-json-1.0"):
		serr = sqsValidation("InvalidParameterValue", "Content-Type must be application/x-amz-json-1.0, got %q", r.Header.Get("Content-Type"))
	default:
		if err := json.Unmarshal(body, &req); err != nil {
			serr = sqsValidation("InvalidParameterValue", "The request body is not valid JSON for %s: %v", action, err)
		}
	}
	sender := "AIDAEMULATED"
	if m := accessKey.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		sender = m[1]
	}
	if serr == nil && s.opts.Latency > 0 {
		time.Sleep(s.Real(s.opts.Latency))
	}
	var f *fault
	if serr == nil {
		s.mu.Lock()
		f = s.pickFault("sqs", action)
		s.mu.Unlock()
		if f != nil && !f.AfterEffect {
			serr = s.sqsFaultError(f)
		}
	}
	var out any
	if serr == nil {
		if action == "ReceiveMessage" {
			out, serr = s.sqs.receiveMessage(r, &req)
		} else {
			s.sqs.mu.Lock()
			out, serr = sqsHandlers[action](&s.sqs, &req, sender)
			s.sqs.mu.Unlock()
		}
		if serr == nil && f != nil {
			serr = s.sqsFaultError(f)
		}
	}
	code := ""
	if serr != nil {
		code = serr.Query
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Service: "sqs", Action: action, Params: jsonParams(body), Code: code, At: s.Now()})
	s.mu.Unlock()
	if serr != nil {
		writeSQSError(w, reqID, serr)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		writeSQSError(w, reqID, &sqsError{Type: "InternalError", Query: "InternalError", Status: 500, Message: err.Error()})
		return
	}
	s.checkModel("sqs", action, b)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-RequestId", reqID)
	_, _ = w.Write(b)
}

func sqsActionNames() []string {
	var out []string
	for a := range sqsHandlers {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

func (s *Server) sqsFaultError(f *fault) *sqsError {
	st := f.Status
	if st == 0 {
		st = 400
		if f.Code == "InternalError" || f.Code == "ServiceUnavailable" {
			st = 500
		}
	}
	msg := f.Message
	if msg == "" {
		msg = "injected fault"
	}
	e := sqsErr(f.Code, "%s", msg)
	e.Status = st
	return e
}

// jsonParams records a JSON body's top-level strings and numbers.
func jsonParams(body []byte) url.Values {
	var m map[string]any
	out := url.Values{}
	if json.Unmarshal(body, &m) != nil {
		return out
	}
	for k, v := range m {
		switch v := v.(type) {
		case string:
			out.Set(k, v)
		case float64:
			out.Set(k, strconv.FormatFloat(v, 'f', -1, 64))
		}
	}
	return out
}

// ---- queue actions (sq.mu held) ----

func (sq *sqsService) createQueue(r *sqsRequest, _ string) (any, *sqsError) {
	q, err := sq.create(r.QueueName, r.Attributes, r.Tags)
	if err != nil {
		return nil, err
	}
	return map[string]string{"QueueUrl": sq.url(q)}, nil
}

func (sq *sqsService) getQueueURL(r *sqsRequest, _ string) (any, *sqsError) {
	q := sq.queues[r.QueueName]
	if q == nil {
		return nil, sqsErr("QueueDoesNotExist", "The specified queue does not exist.")
	}
	return map[string]string{"QueueUrl": sq.url(q)}, nil
}

func (sq *sqsService) getQueueAttributes(r *sqsRequest, _ string) (any, *sqsError) {
	q, err := sq.resolve(r.QueueUrl)
	if err != nil {
		return nil, err
	}
	now := sq.srv.Now()
	q.expire(now)
	vis, inflight, delayed := q.counts(now)
	all := map[string]string{}
	for k, v := range q.attrs {
		all[k] = v
	}
	all["ApproximateNumberOfMessages"] = strconv.Itoa(vis)
	all["ApproximateNumberOfMessagesNotVisible"] = strconv.Itoa(inflight)
	all["ApproximateNumberOfMessagesDelayed"] = strconv.Itoa(delayed)
	all["CreatedTimestamp"] = strconv.FormatInt(q.created.Unix(), 10)
	all["LastModifiedTimestamp"] = strconv.FormatInt(q.modified.Unix(), 10)
	all["QueueArn"] = sq.arn(q)
	out := map[string]string{}
	for _, n := range r.AttributeNames {
		if n == "All" {
			out = all
			break
		}
		v, ok := all[n]
		if !ok && !queueAttrFree[n] {
			return nil, sqsInvalidAttrName("Unknown Attribute %s.", n)
		}
		if ok {
			out[n] = v
		}
	}
	if len(out) == 0 {
		return map[string]any{}, nil
	}
	return map[string]any{"Attributes": out}, nil
}

func (sq *sqsService) setQueueAttributes(r *sqsRequest, _ string) (any, *sqsError) {
	q, err := sq.resolve(r.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := checkQueueAttrs(r.Attributes); err != nil {
		return nil, err
	}
	for k, v := range r.Attributes {
		q.attrs[k] = v
	}
	q.modified = sq.srv.Now()
	return map[string]any{}, nil
}

func (sq *sqsService) listQueues(r *sqsRequest, _ string) (any, *sqsError) {
	var names []string
	for n := range sq.queues {
		if strings.HasPrefix(n, r.QueueNamePrefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	start := 0
	if r.NextToken != "" {
		i := slices.Index(names, r.NextToken)
		if i < 0 {
			return nil, sqsInvalidParam("Invalid NextToken value.")
		}
		start = i
	}
	end, next := len(names), ""
	if r.MaxResults != nil {
		if *r.MaxResults < 1 || *r.MaxResults > 1000 {
			return nil, sqsInvalidParam("Value %d for parameter MaxResults is invalid. Reason: must be between 1 and 1000.", *r.MaxResults)
		}
		if start+*r.MaxResults < end {
			end = start + *r.MaxResults
			next = names[end]
		}
	}
	var urls []string
	for _, n := range names[start:end] {
		urls = append(urls, sq.url(sq.queues[n]))
	}
	out := map[string]any{}
	if len(urls) > 0 {
		out["QueueUrls"] = urls
	}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

func (sq *sqsService) deleteQueue(r *sqsRequest, _ string) (any, *sqsError) {
	q, err := sq.resolve(r.QueueUrl)
	if err != nil {
		return nil, err
	}
	delete(sq.queues, q.name)
	sq.deleted[q.name] = sq.srv.Now()
	q.changed()
	return map[string]any{}, nil
}

func (sq *sqsService) purgeQueue(r *sqsRequest, _ string) (any, *sqsError) {
	q, err := sq.resolve(r.QueueUrl)
	if err != nil {
		return nil, err
	}
	now := sq.srv.Now()
	if !q.purgedAt.IsZero() && now.Sub(q.purgedAt) < time.Minute {
		return nil, sqsErr("PurgeQueueInProgress", "Only one PurgeQueue operation on %s is allowed every 60 seconds.", q.name)
	}
	q.purgedAt = now
	q.msgs = nil
	q.changed()
	return map[string]any{}, nil
}
