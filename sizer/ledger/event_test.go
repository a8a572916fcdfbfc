package ledger

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const running = `{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","account":"123456789012","time":"2026-12-01T10:00:05Z","region":"us-east-1","resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-0abcd1234ef567890"],"detail":{"instance-id":"i-0abcd1234ef567890","state":"running"}}`

func TestParseStateChange(t *testing.T) {
	sc, err := ParseStateChange(running)
	if err != nil || sc.InstanceID != "i-0abcd1234ef567890" || sc.State != "running" || !sc.At.Equal(time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)) {
		t.Fatalf("%+v %v", sc, err)
	}
	warn := strings.Replace(running, "EC2 Instance State-change Notification", "EC2 Spot Instance Interruption Warning", 1)
	if _, err := ParseStateChange(warn); !errors.Is(err, ErrNotStateChange) {
		t.Errorf("interruption warning: %v", err)
	}
	for _, bad := range []string{"", "{", strings.Replace(running, `"running"`, `"exploded"`, 1), strings.Replace(running, "2026-12-01T10:00:05Z", "yesterday", 1),
		strings.Replace(running, `"instance-id":"i-0abcd1234ef567890"`, `"instance-id":"x"`, 1)} {
		if _, err := ParseStateChange(bad); err == nil || errors.Is(err, ErrNotStateChange) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
}

func FuzzParseStateChange(f *testing.F) {
	f.Add(running)
	f.Add(`{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification"}`)
	f.Fuzz(func(t *testing.T, body string) {
		sc, err := ParseStateChange(body)
		if err == nil && (!states[sc.State] || !strings.HasPrefix(sc.InstanceID, "i-") || sc.At.IsZero()) {
			t.Fatalf("%q -> %+v", body, sc)
		}
	})
}
