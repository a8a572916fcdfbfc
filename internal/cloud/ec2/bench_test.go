package ec2

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// scaledBackoff runs the SDK's own exponential jitter backoff in emulated
// time, so that retries and the emulator's token refill share one clock.
type scaledBackoff struct {
	inner *retry.ExponentialJitterBackoff
	scale float64
}

func (s scaledBackoff) BackoffDelay(attempt int, err error) (time.Duration, error) {
	d, e := s.inner.BackoffDelay(attempt, err)
	return time.Duration(float64(d) / s.scale), e
}

// BenchmarkLaunch1000 launches 1,000 single-node requests (32 at a time,
// as concurrent resume programs would) through the real SDK against the
// emulator's real token bucket (1,000 tokens, 2 per second) and compares
// the emulated time taken with the bucket's own minimum for the same work:
// (1000 - tokens at start) / 2 per second. Time runs BURST_BENCH_SCALE
// (default 50) times faster than the wall clock; the SDK's backoff is
// scaled alike. Run: go test ./internal/cloud/ec2 -run ^$ -bench Launch1000 -benchtime 1x
func BenchmarkLaunch1000(b *testing.B) {
	scale := 50.0
	if v, err := strconv.ParseFloat(os.Getenv("BURST_BENCH_SCALE"), 64); err == nil && v > 0 {
		scale = v
	}
	launches, starts := 1000, []float64{0, 500, 1000}
	if testing.Short() { // make test's smoke run: the smallest size, once
		launches, starts = 20, starts[2:]
	}
	for _, startTokens := range starts {
		b.Run(fmt.Sprintf("start-tokens=%d", int(startTokens)), func(b *testing.B) {
			for range b.N {
				benchLaunch(b, scale, startTokens, launches)
			}
		})
	}
}

func benchLaunch(b *testing.B, scale, startTokens float64, launches int) {
	const workers, refill = 32, 2.0
	srv := ec2emu.New(ec2emu.Options{TimeScale: scale, BucketSize: 1000, BucketRefill: refill,
		Subnets: map[string]string{"subnet-a": "us-east-1a", "subnet-b": "us-east-1b"}})
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	srv.AddLaunchTemplate(ec2emu.LaunchTemplateSpec{Name: "burst-gpu", ImageID: "ami-1", MetadataTags: true})
	client := ec2.NewFromConfig(aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}},
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 10
				o.RateLimiter = ratelimit.None
				o.Backoff = scaledBackoff{retry.NewExponentialJitterBackoff(20 * time.Second), scale}
			})
		},
	}, func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL()) })
	p, err := New(client, Options{Cluster: "bench", LaunchTemplateName: "burst-gpu", StateDir: b.TempDir(),
		Subnets: map[string]string{"us-east-1a": "subnet-a", "us-east-1b": "subnet-b"}})
	if err != nil {
		b.Fatal(err)
	}
	offs := []cloud.Offering{spot("g5.xlarge", "us-east-1a"), spot("g5.xlarge", "us-east-1b")}
	srv.SetTokens(startTokens)
	var next, resumes atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	b.ResetTimer()
	start := srv.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(launches) {
					return
				}
				req := cloud.LaunchRequest{Nodes: nodes(uint32(i), fmt.Sprintf("gpu-%d", i)), Offerings: offs}
				for {
					resumes.Add(1)
					_, err := p.Launch(context.Background(), req)
					if err == nil {
						break
					}
					if !errors.Is(err, cloud.ErrThrottled) {
						errs <- err
						return
					}
					// Throttled beyond the SDK's retries: wait and resume again (as Slurm would).
					time.Sleep(time.Duration(float64(time.Second) / scale))
				}
			}
		}()
	}
	wg.Wait()
	took := srv.Now().Sub(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if n := len(srv.Live()); n != launches {
		b.Fatalf("%d live instances, want %d", n, launches)
	}
	minimum := max(0, (float64(launches)-startTokens)/refill)
	b.ReportMetric(took.Seconds(), "emulated-s")
	b.ReportMetric(minimum, "bucket-min-s")
	if minimum > 0 {
		b.ReportMetric(took.Seconds()/minimum, "x-bucket-min")
	}
	b.ReportMetric(float64(srv.CallCount("CreateFleet")), "CreateFleet-calls")
	b.ReportMetric(float64(resumes.Load()-int64(launches)), "re-resumes")
}
