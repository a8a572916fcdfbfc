package ec2emu

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

type sqsMessage struct {
	MessageId              string
	ReceiptHandle          string
	MD5OfBody              string
	Body                   string
	Attributes             map[string]string  `json:",omitempty"`
	MD5OfMessageAttributes string             `json:",omitempty"`
	MessageAttributes      map[string]msgAttr `json:",omitempty"`
}

var systemAttrs = []string{"SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp"}

// receiveMessage serves ReceiveMessage, long polling for WaitTimeSeconds
// (emulated) until at least one message is visible; it takes sq.mu itself.
func (sq *sqsService) receiveMessage(hr *http.Request, r *sqsRequest) (any, *sqsError) {
	n := 1
	if r.MaxNumberOfMessages != nil {
		if n = *r.MaxNumberOfMessages; n < 1 || n > 10 {
			return nil, sqsInvalidParam("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", n)
		}
	}
	if v := r.VisibilityTimeout; v != nil && (*v < 0 || *v > 43200) {
		return nil, sqsInvalidParam("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200, if provided.", *v)
	}
	if v := r.WaitTimeSeconds; v != nil && (*v < 0 || *v > 20) {
		return nil, sqsInvalidParam("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *v)
	}
	sq.mu.Lock()
	defer sq.mu.Unlock()
	q, err := sq.resolve(r.QueueUrl)
	if err != nil {
		return nil, err
	}
	vt := q.attrInt("VisibilityTimeout")
	if r.VisibilityTimeout != nil {
		vt = *r.VisibilityTimeout
	}
	wait := q.attrInt("ReceiveMessageWaitTimeSeconds")
	if r.WaitTimeSeconds != nil {
		wait = *r.WaitTimeSeconds
	}
	s := sq.srv
	deadline := s.Now().Add(time.Duration(wait) * time.Second)
	var got []*message
	for {
		now := s.Now()
		if sq.queues[q.name] != q { // deleted while we waited
			return nil, sqsErr("QueueDoesNotExist", "The specified queue does not exist.")
		}
		got = q.take(n, time.Duration(vt)*time.Second, now)
		if len(got) > 0 || !now.Before(deadline) {
			break
		}
		until := deadline
		if t := q.nextVisible(now); !t.IsZero() && t.Before(until) {
			until = t
		}
		wake := q.wake
		sq.mu.Unlock()
		timer := time.NewTimer(s.Real(until.Sub(now)) + time.Millisecond)
		select {
		case <-wake:
		case <-timer.C:
		case <-hr.Context().Done():
		case <-sq.closing:
		}
		timer.Stop()
		sq.mu.Lock()
		if hr.Context().Err() != nil {
			return map[string]any{}, nil
		}
		select {
		case <-sq.closing:
			return map[string]any{}, nil
		default:
		}
	}
	sysNames := append(slices.Clone(r.AttributeNames), r.MessageSystemAttributeNames...)
	var out []sqsMessage
	for _, m := range got {
		x := sqsMessage{MessageId: m.id, ReceiptHandle: m.handle, MD5OfBody: m.md5, Body: m.body}
		x.Attributes = m.systemAttributes(sysNames)
		if attrs := m.selectAttrs(r.MessageAttributeNames); len(attrs) > 0 {
			x.MessageAttributes = attrs
			x.MD5OfMessageAttributes = attrsMD5(attrs)
		}
		out = append(out, x)
	}
	if len(out) == 0 {
		return map[string]any{}, nil
	}
	return map[string]any{"Messages": out}, nil
}

func (m *message) systemAttributes(names []string) map[string]string {
	all := slices.Contains(names, "All")
	out := map[string]string{}
	for _, n := range systemAttrs {
		if !all && !slices.Contains(names, n) {
			continue
		}
		switch n {
		case "SenderId":
			out[n] = m.sender
		case "SentTimestamp":
			out[n] = strconv.FormatInt(m.sent.UnixMilli(), 10)
		case "ApproximateReceiveCount":
			out[n] = strconv.Itoa(m.receives)
		case "ApproximateFirstReceiveTimestamp":
			out[n] = strconv.FormatInt(m.firstReceive.UnixMilli(), 10)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// selectAttrs picks the message attributes a receive asked for: "All",
// ".*", exact names, or prefixes ending in ".*".
func (m *message) selectAttrs(names []string) map[string]msgAttr {
	out := map[string]msgAttr{}
	for k, a := range m.attrs {
		for _, n := range names {
			p, wild := strings.CutSuffix(n, ".*")
			if n == "All" || n == ".*" || n == k || (wild && strings.HasPrefix(k, p+".")) {
				out[k] = a
				break
			}
		}
	}
	return out
}

// ---- message actions ----

func validBody(b string) bool {
	for _, r := range b {
		ok := r == 0x9 || r == 0xA || r == 0xD || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
		if !ok || r == utf8.RuneError {
			return false
		}
	}
	return true
}

func (sq *sqsService) sendMessage(r *sqsRequest, sender string) (any, *sqsError) {
	q, err := sq.resolve(r.QueueUrl)
	if err != nil {
		return nil, err
	}
	if r.MessageBody == nil || *r.MessageBody == "" {
		return nil, sqsValidation("MissingParameter", "The request must contain the parameter MessageBody.")
	}
	if len(*r.MessageBody) > q.attrInt("MaximumMessageSize") {
		return nil, sqsInvalidParam("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", q.attrInt("MaximumMessageSize"))
	}
	if !validBody(*r.MessageBody) {
		return nil, sqsErr("InvalidMessageContents", "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
	}
	delay := q.attrInt("DelaySeconds")
	if r.DelaySeconds != nil {
		if *r.DelaySeconds < 0 || *r.DelaySeconds > 900 {
			return nil, sqsInvalidParam("Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and 900.", *r.DelaySeconds)
		}
		delay = *r.DelaySeconds
	}
	if len(r.MessageAttributes) > 10 {
		return nil, sqsInvalidParam("Number of message attributes [%d] exceeds the allowed maximum [10].", len(r.MessageAttributes))
	}
	for n, a := range r.MessageAttributes {
		t, _, _ := strings.Cut(a.DataType, ".")
		switch {
		case t != "String" && t != "Number" && t != "Binary":
			return nil, sqsInvalidParam("The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", n)
		case (t == "Binary") != (a.StringValue == nil):
			return nil, sqsInvalidParam("Message (user) attribute '%s' must contain a non-empty value of message attribute type '%s'.", n, t)
		}
	}
	m := sq.enqueue(q, *r.MessageBody, r.MessageAttributes, delay, sender)
	out := map[string]string{"MessageId": m.id, "MD5OfMessageBody": m.md5}
	if len(m.attrs) > 0 {
		out["MD5OfMessageAttributes"] = attrsMD5(m.attrs)
	}
	return out, nil
}

func (sq *sqsService) deleteMessage(r *sqsRequest, _ string) (any, *sqsError) {
	q, err := sq.resolve(r.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := sq.deleteOne(q, r.ReceiptHandle); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

// deleteOne deletes by receipt handle. A handle that is not the message's
// latest succeeds without deleting (SQS: "you must provide the most
// recently received receipt handle"), as does one of a deleted message.
func (sq *sqsService) deleteOne(q *queue, h string) *sqsError {
	m, latest, err := q.byHandle(h)
	if err != nil {
		return err
	}
	if m != nil && latest {
		q.remove(m)
	}
	return nil
}

var batchID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func (sq *sqsService) deleteMessageBatch(r *sqsRequest, _ string) (any, *sqsError) {
	q, err := sq.resolve(r.QueueUrl)
	if err != nil {
		return nil, err
	}
	switch {
	case len(r.Entries) == 0:
		return nil, sqsErr("EmptyBatchRequest", "There should be at least one DeleteMessageBatchRequestEntry in the request.")
	case len(r.Entries) > 10:
		return nil, sqsErr("TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent %d.", len(r.Entries))
	}
	seen := map[string]bool{}
	for _, e := range r.Entries {
		if !batchID.MatchString(e.Id) {
			return nil, sqsErr("InvalidBatchEntryId", "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
		}
		if seen[e.Id] {
			return nil, sqsErr("BatchEntryIdsNotDistinct", "Id %s repeated.", e.Id)
		}
		seen[e.Id] = true
	}
	type ok struct{ Id string }
	type failed struct {
		Id          string
		SenderFault bool
		Code        string
		Message     string
	}
	good, bad := []ok{}, []failed{}
	for _, e := range r.Entries {
		if err := sq.deleteOne(q, e.ReceiptHandle); err != nil {
			bad = append(bad, failed{e.Id, true, err.Type, err.Message})
			continue
		}
		good = append(good, ok{e.Id})
	}
	return map[string]any{"Successful": good, "Failed": bad}, nil
}

func (sq *sqsService) changeMessageVisibility(r *sqsRequest, _ string) (any, *sqsError) {
	q, err := sq.resolve(r.QueueUrl)
	if err != nil {
		return nil, err
	}
	if r.VisibilityTimeout == nil || *r.VisibilityTimeout < 0 || *r.VisibilityTimeout > 43200 {
		return nil, sqsInvalidParam("Value for parameter VisibilityTimeout is invalid. Reason: must be between 0 and 43200.")
	}
	m, latest, err := q.byHandle(r.ReceiptHandle)
	if err != nil {
		return nil, err
	}
	if m == nil || !latest {
		return nil, sqsErr("ReceiptHandleIsInvalid", "The receipt handle has expired.")
	}
	now := sq.srv.Now()
	if !m.visibleAt.After(now) {
		return nil, sqsErr("MessageNotInflight", "The message referred to isn't in flight.")
	}
	m.visibleAt = now.Add(time.Duration(*r.VisibilityTimeout) * time.Second)
	q.changed()
	return map[string]any{}, nil
}
