package imds

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/ec2emu"
)

// TestAgainstEC2Emulator reads the per-instance IMDSv2 endpoint of the
// project's EC2 emulator (test/ec2emu), which burst's end-to-end tests give
// the agent: instance id, no notice (404), a rebalance, then a spot notice
// whose time is the emulator's two-minute deadline.
func TestAgainstEC2Emulator(t *testing.T) {
	started := make(chan ec2emu.Instance, 1)
	emu := ec2emu.New(ec2emu.Options{BootDelay: -1, OnStart: func(in ec2emu.Instance) { started <- in }})
	if err := emu.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emu.Close() })

	// One spot instance through the EC2 Query API (signature not checked).
	form := url.Values{"Action": {"RunInstances"}, "Version": {ec2emu.APIVersion}, "ImageId": {"ami-0burst"},
		"InstanceType": {"g5.xlarge"}, "MinCount": {"1"}, "MaxCount": {"1"}, "SubnetId": {"subnet-a"},
		"InstanceMarketOptions.MarketType": {"spot"}, "InstanceMarketOptions.SpotOptions.SpotInstanceType": {"one-time"}}
	req, _ := http.NewRequest(http.MethodPost, emu.URL()+"/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("RunInstances: %s\n%s", resp.Status, body)
	}
	var in ec2emu.Instance
	select {
	case in = <-started:
	case <-time.After(time.Minute): // hang guard only
		t.Fatal("instance never started")
	}

	ctx := context.Background()
	c := New(Options{Endpoint: in.IMDSURL})
	if id, err := c.InstanceID(ctx); err != nil || id != in.ID {
		t.Fatalf("instance id = %q, %v; want %s", id, err, in.ID)
	}
	if _, ok, err := c.InstanceAction(ctx); ok || err != nil {
		t.Fatalf("before a notice: ok=%v err=%v, want 404 read as none", ok, err)
	}
	if _, ok, err := c.Rebalance(ctx); ok || err != nil {
		t.Fatalf("before a rebalance: ok=%v err=%v", ok, err)
	}
	if err := emu.Rebalance(in.ID); err != nil {
		t.Fatal(err)
	}
	if r, ok, err := c.Rebalance(ctx); !ok || err != nil || r.NoticeTime.IsZero() {
		t.Fatalf("rebalance = %+v ok=%v err=%v", r, ok, err)
	}
	before := emu.Now()
	if err := emu.Interrupt(in.ID); err != nil {
		t.Fatal(err)
	}
	a, ok, err := c.InstanceAction(ctx)
	if !ok || err != nil || a.Action != "terminate" {
		t.Fatalf("instance action = %+v ok=%v err=%v", a, ok, err)
	}
	if d := a.Time.Sub(before.Truncate(time.Second)); d < 119*time.Second || d > 121*time.Second {
		t.Fatalf("notice time %s is %v after the interrupt, want EC2's two minutes", a.Time, d)
	}
}
