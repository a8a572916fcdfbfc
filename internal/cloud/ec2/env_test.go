package ec2

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/ec2emu/awsmodel"
)

var testSubnets = map[string]string{"us-east-1a": "subnet-a", "us-east-1b": "subnet-b", "us-east-1c": "subnet-c"}

// newClient is the real SDK client pointed at the emulator, with static
// credentials and a fast retryer (no client-side retry quota).
func newClient(url string, attempts int, maxBackoff time.Duration) *ec2.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRET", ""),
		HTTPClient:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.MaxBackoff = maxBackoff
				o.RateLimiter = ratelimit.None
			})
		},
	}
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(url) })
}

type env struct {
	srv    *ec2emu.Server
	client *ec2.Client
	prov   *Provider
	lt     string
}

// newEnv starts an emulator with an admin-made launch template and a provider over it.
func newEnv(t testing.TB, eo ec2emu.Options, po Options) *env {
	t.Helper()
	if eo.Subnets == nil {
		eo.Subnets = map[string]string{"subnet-a": "us-east-1a", "subnet-b": "us-east-1b", "subnet-c": "us-east-1c"}
	}
	if eo.TimeScale == 0 {
		eo.TimeScale = 1000
	}
	if eo.Models == nil {
		// the emulator's answers are checked against AWS's API models
		// (botocore's), as in every e2e test; without botocore, unchecked
		if set, err := awsmodel.Default(); err == nil {
			eo.Models = set
		} else if os.Getenv("BURST_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%v; BURST_REQUIRE_TOOLS=1 makes this a failure", err)
		}
	}
	srv := ec2emu.New(eo)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Close()
		for _, v := range srv.ModelViolations() {
			t.Errorf("the emulator's response breaks AWS's API model: %s", v)
		}
	})
	e := &env{srv: srv, client: newClient(srv.URL(), 10, 20*time.Millisecond)}
	if po.ImageID == "" && po.LaunchTemplateName == "" {
		po.LaunchTemplateName = "burst-gpu"
		srv.AddLaunchTemplate(ec2emu.LaunchTemplateSpec{Name: "burst-gpu", ImageID: "ami-0123", MetadataTags: true,
			UserData: []byte("#!/bin/sh\nexec burst-agent bootstrap\n"), Tags: map[string]string{TagCluster: "test"}})
		e.lt = "burst-gpu"
	}
	if po.Cluster == "" {
		po.Cluster = "test"
	}
	if po.Subnets == nil {
		po.Subnets = testSubnets
	}
	if po.StateDir == "" {
		po.StateDir = t.TempDir()
	}
	p, err := New(e.client, po)
	if err != nil {
		t.Fatal(err)
	}
	e.prov = p
	return e
}

func spot(typ, zone string) cloud.Offering {
	return cloud.Offering{InstanceType: typ, Zone: zone, Capacity: capacity.Spot}
}

func nodes(job uint32, names ...string) []cloud.NodeSpec {
	out := make([]cloud.NodeSpec, len(names))
	for i, n := range names {
		out[i] = cloud.NodeSpec{Node: n, JobID: job, Account: "physics", User: "alice", Class: "train"}
	}
	return out
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}
