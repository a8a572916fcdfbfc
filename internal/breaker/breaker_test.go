package breaker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time             { return c.t }
func (c *clock) add(d time.Duration)        { c.t = c.t.Add(d) }
func newClock() *clock                      { return &clock{time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC)} }
func allowed(b *Breaker, class string) bool { ok, _, _ := b.Allow(class); return ok }

func TestLifecycle(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		t.Run(fmt.Sprintf("file=%v", dir != ""), func(t *testing.T) {
			c := newClock()
			b := New(Options{Dir: dir, Threshold: 3, Cooldown: 5 * time.Minute, Now: c.now})
			for i := 0; i < 2; i++ {
				b.Failure("l4", "InsufficientInstanceCapacity for g6.xlarge spot in us-east-1a")
				if !allowed(b, "l4") {
					t.Fatalf("open after %d failures, threshold 3", i+1)
				}
			}
			b.Failure("l4", "InsufficientInstanceCapacity for g6.xlarge spot in us-east-1a")
			ok, until, reason := b.Allow("l4")
			if ok || !until.Equal(c.t.Add(5*time.Minute)) {
				t.Fatalf("after 3 failures: ok=%v until=%v", ok, until)
			}
			want := "burst: launches for class l4 paused until 15:05:00 UTC after 3 failures: InsufficientInstanceCapacity"
			if !strings.HasPrefix(reason, want) || len(reason) > 120 {
				t.Fatalf("reason %q (len %d), want prefix %q", reason, len(reason), want)
			}
			if !allowed(b, "a10g") {
				t.Fatal("another class is paused too")
			}
			c.add(5 * time.Minute)
			if !allowed(b, "l4") {
				t.Fatal("no half-open trial after the cool-down")
			}
			if ok, _, reason := b.Allow("l4"); ok || !strings.Contains(reason, "trial launch") {
				t.Fatalf("second caller during the trial: ok=%v reason %q", ok, reason)
			}
			b.Failure("l4", "still no capacity")
			_, until, _ = b.Allow("l4")
			if !until.Equal(c.t.Add(10 * time.Minute)) {
				t.Fatalf("re-trip cool-down ends %v, want doubled (10m) %v", until, c.t.Add(10*time.Minute))
			}
			c.add(10 * time.Minute)
			if !allowed(b, "l4") {
				t.Fatal("no trial after the second cool-down")
			}
			b.Success("l4")
			for i := 0; i < 3; i++ {
				if !allowed(b, "l4") {
					t.Fatal("closed breaker refuses")
				}
			}
			b.Failure("l4", "x")
			b.Failure("l4", "x")
			if !allowed(b, "l4") {
				t.Fatal("failure count not reset by success")
			}
			sts, err := b.Snapshot()
			if err != nil || len(sts) != 1 || sts[0].TotalTrips != 2 || sts[0].Failures != 2 || sts[0].State != Closed {
				t.Fatalf("snapshot %+v err %v", sts, err)
			}
		})
	}
}

func TestSuccessResetsStreak(t *testing.T) {
	b := New(Options{Threshold: 2})
	b.Failure("l4", "a")
	b.Success("l4")
	b.Failure("l4", "b")
	if !allowed(b, "l4") {
		t.Fatal("failures separated by a success opened the breaker")
	}
}

func TestTrialThatNeverReports(t *testing.T) {
	c := newClock()
	b := New(Options{Threshold: 1, Cooldown: time.Minute, Trial: 30 * time.Second, Now: c.now})
	b.Failure("l4", "x")
	c.add(time.Minute)
	if !allowed(b, "l4") || allowed(b, "l4") {
		t.Fatal("want exactly one trial")
	}
	c.add(30 * time.Second) // the trial's resume was SIGKILLed
	if !allowed(b, "l4") {
		t.Fatal("no new trial after the first one timed out")
	}
}

func TestMaxCooldown(t *testing.T) {
	c := newClock()
	b := New(Options{Threshold: 1, Cooldown: time.Minute, MaxCooldown: 3 * time.Minute, Now: c.now})
	var got []time.Duration
	for i := 0; i < 4; i++ {
		b.Failure("l4", "x")
		_, until, _ := b.Allow("l4")
		got = append(got, until.Sub(c.t))
		c.t = until
		allowed(b, "l4") // take the trial
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 3 * time.Minute}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cool-downs %v, want %v", got, want)
	}
}

// Processes share the state: separate Breakers on one directory (each
// opening its own lock file, as separate burst-resume processes do) see
// each other's failures, and concurrent updates lose none.
func TestSharedAcrossInstances(t *testing.T) {
	dir := t.TempDir()
	const n = 20
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			New(Options{Dir: dir, Threshold: 1000}).Failure("l4", "x")
		}()
	}
	wg.Wait()
	sts, err := New(Options{Dir: dir}).Snapshot()
	if err != nil || len(sts) != 1 || sts[0].Failures != n {
		t.Fatalf("after %d concurrent failures: %+v err %v", n, sts, err)
	}
	a, b := New(Options{Dir: dir, Threshold: 3}), New(Options{Dir: dir, Threshold: 3})
	a.Success("l4")
	a.Failure("l4", "x")
	b.Failure("l4", "x")
	a.Failure("l4", "x")
	if allowed(b, "l4") {
		t.Fatal("b does not see the breaker a opened")
	}
}

func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, File), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := New(Options{Dir: dir, Threshold: 1})
	if !allowed(b, "l4") {
		t.Fatal("a corrupt file blocks launches")
	}
	b.Failure("l4", "x")
	if allowed(b, "l4") {
		t.Fatal("state not rebuilt after a corrupt file")
	}
}

func TestUnwritableDirAllows(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	b := New(Options{Dir: filepath.Join(f, "sub"), Threshold: 1})
	b.Failure("l4", "x") // logged, not fatal
	if !allowed(b, "l4") {
		t.Fatal("an unusable state directory must not stop launches")
	}
}

func TestCounts(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("launching: %w", context.DeadlineExceeded), false},
		{&cloud.Error{Kind: cloud.KindThrottled, Code: "RequestLimitExceeded"}, false},
		{&cloud.Error{Kind: cloud.KindInsufficientCapacity, Code: "InsufficientInstanceCapacity"}, true},
		{&cloud.Error{Kind: cloud.KindQuota, Code: "MaxSpotInstanceCountExceeded"}, true},
		{&cloud.Error{Kind: cloud.KindUnauthorized, Code: "UnauthorizedOperation"}, true},
		{errors.New("boom"), true},
	}
	for _, c := range cases {
		if got := Counts(c.err); got != c.want {
			t.Errorf("Counts(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
