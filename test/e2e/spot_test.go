package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestSpotInterruption: the example training job runs on a spot node; the
// emulator interrupts that instance; burst-agent (started by the node's
// bootstrap) sends the checkpoint signal, waits for the job's marker,
// requeues it and hands the node back; a new instance is launched and the
// job finishes from its checkpoint, redoing at most one checkpoint
// interval of steps.
func TestSpotInterruption(t *testing.T) {
	const every = 5
	s := start(t, stack.Options{
		Emulator: ec2emu.Options{NoticePeriod: 45 * time.Second},
		Configure: func(c *config.Config) {
			c.Agent.ReportInterval = config.D(2 * time.Second)
		},
	})
	ctx := context.Background()
	id := sbatchTrain(t, s, 30, every)
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	logPath := filepath.Join(s.Cluster.Dir(), "work", "train-"+id+".out")
	stepsDone := func() int {
		b, _ := os.ReadFile(logPath)
		m := regexp.MustCompile(`step (\d+) done`).FindAllStringSubmatch(string(b), -1)
		if len(m) == 0 {
			return 0
		}
		n, _ := strconv.Atoi(m[len(m)-1][1])
		return n
	}
	eventually(t, 60*time.Second, "8 training steps", func() bool { return stepsDone() >= 8 })
	live := liveInstances(s)
	if len(live) != 1 {
		t.Fatalf("want 1 live instance, got %d", len(live))
	}
	first := live[0]
	if err := s.Emu.Interrupt(first.ID); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	// requeued well before the instance goes (the notice is 45 s here)
	eventually(t, 40*time.Second, "the job requeued by burst-agent", func() bool {
		o, _ := s.Cluster.Run(ctx, "scontrol", "show", "job", id)
		return strings.Contains(o, "Restarts=1")
	})
	requeued := time.Since(t0)
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	b, _ := os.ReadFile(logPath)
	text := string(b)
	if !strings.Contains(text, "on signal; wrote") {
		t.Errorf("the job never checkpointed on the signal:\n%s", text)
	}
	m := regexp.MustCompile(`done: 30 steps, (\d+) redone`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("the job did not finish all steps:\n%s", text)
	}
	if redone, _ := strconv.Atoi(m[1]); redone > every {
		t.Errorf("redid %d steps, more than one checkpoint interval (%d)", redone, every)
	}
	if !strings.Contains(text, "resumed from checkpoint") {
		t.Errorf("the requeued job did not resume from its checkpoint:\n%s", text)
	}
	all := s.Emu.Instances()
	if len(all) < 2 {
		t.Fatalf("want a replacement instance, got %d instances", len(all))
	}
	if in, _ := s.Emu.Instance(first.ID); in.State != "terminated" && in.State != "shutting-down" {
		t.Errorf("interrupted instance %s is %s", first.ID, in.State)
	}
	t.Logf("requeued %.1f s after the notice; %d instances in all", requeued.Seconds(), len(all))
	eventually(t, 30*time.Second, "every instance released", func() bool { return len(liveInstances(s)) == 0 })

	// the feedback loop: the agents' utilisation reports and the launch and
	// termination events reached the sizer, which accounts them to the job's
	// account
	c, err := s.SizerClient(s.Token)
	if err != nil {
		t.Fatal(err)
	}
	var row sizerapi.UsageRow
	eventually(t, 40*time.Second, "the sizer to hold the job's request and the agents' measurements of it", func() bool {
		r, err := c.UsageReport(ctx)
		if err != nil {
			return false
		}
		for _, a := range r.Accounts {
			if a.Account == "demo" {
				row = a
				return a.Jobs > 0 && a.Reported > 0 && a.GPUsRequested > 0
			}
		}
		return false
	})
	var accepted float64
	eventually(t, 30*time.Second, "agent utilisation records accepted by the sizer", func() bool {
		b, err := s.Metrics()
		if err != nil {
			return false
		}
		m := regexp.MustCompile(`burst_sizer_report_records_total\{result="accepted"\} ([0-9.e+]+)`).FindStringSubmatch(b)
		if m == nil {
			return false
		}
		accepted, _ = strconv.ParseFloat(m[1], 64)
		return accepted > 0
	})
	t.Logf("sizer accepted %.0f agent records", accepted)
	t.Logf("sizer report for account demo: %+v", row)
	if row.GPUMemUsedGiB <= 0 || row.GPUMemUsedGiB > row.GPUMemReqGiB {
		t.Errorf("reported GPU memory use %.1f GiB is not within the node's %.1f GiB GPU", row.GPUMemUsedGiB, row.GPUMemReqGiB)
	}
}
