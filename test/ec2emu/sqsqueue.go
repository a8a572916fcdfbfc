package ec2emu

import (
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sqsService is the emulator's Amazon SQS: standard queues only, in
// emulated time (visibility timeouts, delays, retention and long-poll waits
// all run at Options.TimeScale).
type sqsService struct {
	srv     *Server
	mu      sync.Mutex
	queues  map[string]*queue    // by name
	deleted map[string]time.Time // name -> when deleted (QueueDeletedRecently)
	closing chan struct{}
	once    sync.Once
}

type queue struct {
	name              string
	attrs             map[string]string // settable attributes
	created, modified time.Time
	msgs              []*message // arrival order
	wake              chan struct{}
	purgedAt          time.Time
	tags              map[string]string
}

type msgAttr struct {
	DataType    string
	StringValue *string `json:",omitempty"`
	BinaryValue []byte  `json:",omitempty"`
}

type message struct {
	id, body, md5 string
	attrs         map[string]msgAttr
	sender        string
	sent          time.Time
	visibleAt     time.Time
	receives      int
	firstReceive  time.Time
	handle        string // the latest receipt handle
}

func (q *sqsService) init(s *Server) {
	q.srv = s
	q.queues = map[string]*queue{}
	q.deleted = map[string]time.Time{}
	q.closing = make(chan struct{})
}

func (q *sqsService) close() { q.once.Do(func() { close(q.closing) }) }

// queue attribute defaults and limits (SQS API Reference, SetQueueAttributes).
var queueAttrLimits = map[string][2]int{
	"DelaySeconds":                  {0, 900},
	"MaximumMessageSize":            {1024, 1048576},
	"MessageRetentionPeriod":        {60, 1209600},
	"ReceiveMessageWaitTimeSeconds": {0, 20},
	"VisibilityTimeout":             {0, 43200},
	"KmsDataKeyReusePeriodSeconds":  {60, 86400},
}

var queueAttrFree = map[string]bool{"Policy": true, "RedrivePolicy": true, "RedriveAllowPolicy": true, "KmsMasterKeyId": true, "SqsManagedSseEnabled": true}

func defaultQueueAttrs() map[string]string {
	return map[string]string{"DelaySeconds": "0", "MaximumMessageSize": "262144", "MessageRetentionPeriod": "345600",
		"ReceiveMessageWaitTimeSeconds": "0", "VisibilityTimeout": "30", "SqsManagedSseEnabled": "true"}
}

// checkQueueAttrs validates settable attributes.
func checkQueueAttrs(attrs map[string]string) *sqsError {
	for k, v := range attrs {
		if lim, ok := queueAttrLimits[k]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < lim[0] || n > lim[1] {
				return sqsInvalidAttrValue("Invalid value for the parameter %s. Reason: must be an integer from %d to %d.", k, lim[0], lim[1])
			}
			continue
		}
		switch {
		case k == "FifoQueue" || k == "ContentBasedDeduplication" || k == "DeduplicationScope" || k == "FifoThroughputLimit":
			return sqsInvalidAttrName("%s: FIFO queues are not emulated (EventBridge targets here are standard queues).", k)
		case k == "SqsManagedSseEnabled" && v != "true" && v != "false":
			return sqsInvalidAttrValue("Invalid value for the parameter SqsManagedSseEnabled. Reason: must be true or false.")
		case !queueAttrFree[k]:
			return sqsInvalidAttrName("Unknown Attribute %s.", k)
		}
	}
	return nil
}

var queueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// create makes a queue or returns the existing one when its attributes
// agree; sq.mu held.
func (sq *sqsService) create(name string, attrs, tags map[string]string) (*queue, *sqsError) {
	if strings.HasSuffix(name, ".fifo") {
		return nil, sqsInvalidParam("FIFO queues are not emulated: %s", name)
	}
	if !queueName.MatchString(name) {
		return nil, sqsInvalidParam("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	if err := checkQueueAttrs(attrs); err != nil {
		return nil, err
	}
	now := sq.srv.Now()
	if q := sq.queues[name]; q != nil {
		for k, v := range attrs {
			if q.attrs[k] != v {
				return nil, sqsErr("QueueNameExists", "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return q, nil
	}
	if t, ok := sq.deleted[name]; ok && now.Sub(t) < time.Minute {
		return nil, sqsErr("QueueDeletedRecently", "You must wait 60 seconds after deleting a queue before you can create another with the same name.")
	}
	q := &queue{name: name, attrs: defaultQueueAttrs(), created: now, modified: now, wake: make(chan struct{}), tags: map[string]string{}}
	for k, v := range attrs {
		q.attrs[k] = v
	}
	for k, v := range tags {
		q.tags[k] = v
	}
	sq.queues[name] = q
	return q, nil
}

// ensureQueue creates a queue with default attributes unless it exists.
func (sq *sqsService) ensureQueue(name string) (*queue, error) {
	sq.mu.Lock()
	defer sq.mu.Unlock()
	q, err := sq.create(name, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("queue %q: %s", name, err.Message)
	}
	return q, nil
}

func (sq *sqsService) baseURL() string {
	if sq.srv.ln == nil {
		return "http://127.0.0.1"
	}
	return sq.srv.URL()
}

func (sq *sqsService) url(q *queue) string {
	return sq.baseURL() + "/" + sq.srv.opts.Account + "/" + q.name
}

func (sq *sqsService) arn(q *queue) string {
	return "arn:aws:sqs:" + sq.srv.opts.Region + ":" + sq.srv.opts.Account + ":" + q.name
}

// QueueURL returns the URL of a queue (that GetQueueUrl would return).
func (s *Server) QueueURL(name string) (string, bool) {
	s.sqs.mu.Lock()
	defer s.sqs.mu.Unlock()
	q := s.sqs.queues[name]
	if q == nil {
		return "", false
	}
	return s.sqs.url(q), true
}

// resolve finds the queue of a QueueUrl; any host is accepted, the path
// must be /<account>/<name>; sq.mu held.
func (sq *sqsService) resolve(u string) (*queue, *sqsError) {
	if u == "" {
		return nil, sqsErr("MissingParameter", "The request must contain the parameter QueueUrl.")
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return nil, sqsErr("InvalidAddress", "The address %s is not valid for this endpoint.", u)
	}
	parts := strings.Split(strings.Trim(pu.Path, "/"), "/")
	if len(parts) != 2 || parts[0] != sq.srv.opts.Account {
		return nil, sqsErr("QueueDoesNotExist", "The specified queue does not exist.")
	}
	q := sq.queues[parts[1]]
	if q == nil {
		return nil, sqsErr("QueueDoesNotExist", "The specified queue does not exist.")
	}
	return q, nil
}

func (q *queue) attrInt(k string) int {
	n, _ := strconv.Atoi(q.attrs[k])
	return n
}

// changed wakes long polls; sq.mu held.
func (q *queue) changed() {
	close(q.wake)
	q.wake = make(chan struct{})
}

func md5hex(b []byte) string {
	h := md5.Sum(b)
	return hex.EncodeToString(h[:])
}

// attrsMD5 is SQS's MD5OfMessageAttributes: for each attribute in name
// order, the length-prefixed name, data type, a transport byte (1 string,
// 2 binary) and the length-prefixed value.
func attrsMD5(attrs map[string]msgAttr) string {
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b []byte
	put := func(p []byte) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	for _, n := range names {
		a := attrs[n]
		put([]byte(n))
		put([]byte(a.DataType))
		if a.StringValue != nil {
			b = append(b, 1)
			put([]byte(*a.StringValue))
		} else {
			b = append(b, 2)
			put(a.BinaryValue)
		}
	}
	return md5hex(b)
}

// enqueue adds a message; sq.mu held.
func (sq *sqsService) enqueue(q *queue, body string, attrs map[string]msgAttr, delay int, sender string) *message {
	now := sq.srv.Now()
	m := &message{id: newUUID(), body: body, md5: md5hex([]byte(body)), attrs: attrs, sender: sender, sent: now,
		visibleAt: now.Add(time.Duration(delay) * time.Second)}
	q.msgs = append(q.msgs, m)
	q.changed()
	return m
}

// deliver is EventBridge putting an event in a queue; false when the
// queue does not exist.
func (sq *sqsService) deliver(name, body string) bool {
	sq.mu.Lock()
	defer sq.mu.Unlock()
	q := sq.queues[name]
	if q == nil {
		return false
	}
	sq.enqueue(q, body, nil, q.attrInt("DelaySeconds"), "AIDAEVENTBRIDGEEMULATED")
	return true
}

// expire drops messages past the retention period; sq.mu held.
func (q *queue) expire(now time.Time) {
	keep := time.Duration(q.attrInt("MessageRetentionPeriod")) * time.Second
	live := q.msgs[:0]
	for _, m := range q.msgs {
		if now.Sub(m.sent) < keep {
			live = append(live, m)
		}
	}
	clear(q.msgs[len(live):])
	q.msgs = live
}

// take receives up to n visible messages, hiding them for vt; sq.mu held.
func (q *queue) take(n int, vt time.Duration, now time.Time) []*message {
	q.expire(now)
	var out []*message
	for _, m := range q.msgs {
		if len(out) == n {
			break
		}
		if m.visibleAt.After(now) {
			continue
		}
		m.receives++
		if m.firstReceive.IsZero() {
			m.firstReceive = now
		}
		m.visibleAt = now.Add(vt)
		m.handle = newReceiptHandle(q.name, m.id)
		out = append(out, m)
	}
	return out
}

// nextVisible is when the next hidden message becomes visible (zero: none).
func (q *queue) nextVisible(now time.Time) time.Time {
	var t time.Time
	for _, m := range q.msgs {
		if m.visibleAt.After(now) && (t.IsZero() || m.visibleAt.Before(t)) {
			t = m.visibleAt
		}
	}
	return t
}

func newReceiptHandle(queue, msgID string) string {
	var r [12]byte
	_, _ = rand.Read(r[:])
	return base64.RawURLEncoding.EncodeToString([]byte(queue + "\x00" + msgID + "\x00" + hex.EncodeToString(r[:])))
}

// byHandle finds the message a receipt handle names: the message (nil
// when it is gone) and whether the handle is its latest; an error when the
// handle is not one of this queue's.
func (q *queue) byHandle(h string) (*message, bool, *sqsError) {
	b, err := base64.RawURLEncoding.DecodeString(h)
	parts := strings.Split(string(b), "\x00")
	if h == "" || err != nil || len(parts) != 3 || parts[0] != q.name {
		return nil, false, sqsErr("ReceiptHandleIsInvalid", "The input receipt handle \"%s\" is not a valid receipt handle.", h)
	}
	for _, m := range q.msgs {
		if m.id == parts[1] {
			return m, m.handle == h, nil
		}
	}
	return nil, false, nil
}

func (q *queue) remove(m *message) {
	for i, x := range q.msgs {
		if x == m {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			return
		}
	}
}

// counts are the Approximate* attributes.
func (q *queue) counts(now time.Time) (visible, inflight, delayed int) {
	for _, m := range q.msgs {
		switch {
		case !m.visibleAt.After(now):
			visible++
		case m.receives > 0:
			inflight++
		default:
			delayed++
		}
	}
	return
}
