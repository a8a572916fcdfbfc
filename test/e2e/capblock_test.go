package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/blockwatch"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestCapacityBlockRequeuedBeforeEnd: class a10g names a Capacity Block of
// g5.xlarge (its top type) whose end is 44 minutes away, so EC2's
// warning (40 minutes before the end) comes in 4. A job whose time limit
// (60 min) runs past the warning is not put on the block; one of 2 minutes
// is. An admin then lengthens that job's limit (as happens), so it still
// runs at the warning: burst-sizer's watcher checkpoint-signals and
// requeues it and hands the node back before EC2 reclaims the block (30
// minutes before its end); its node is fenced in Slurm from the warning on;
// the job resumes from its checkpoint outside the block and completes.
// The block is billed once, whole (the ledger check every e2e test ends
// with compares it with EC2's).
func TestCapacityBlockRequeuedBeforeEnd(t *testing.T) {
	versionBlind(t)
	s := start(t, stack.Options{Configure: func(c *config.Config) { c.Agent.CheckpointGrace = config.D(60 * time.Second) }})
	ctx := context.Background()
	now := s.Emu.Now()
	end := now.Add(44 * time.Minute)
	cb, err := s.Emu.AddCapacityBlock(ec2emu.CapacityBlockSpec{InstanceType: "g5.xlarge", Zone: "us-east-1a", Count: 2, Start: now.Add(-time.Minute), End: end, UpfrontUSD: 42.5})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateConfig(func(c *config.Config) {
		for i := range c.Classes {
			if c.Classes[i].Name == "a10g" {
				c.Classes[i].Reservations = config.Reservations{CapacityBlocks: []config.CapacityBlock{{ID: cb, PriceUSD: 42.5}}}
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	// the sizer reads the blocks (its watcher, its ledger) at start
	s.StopSizer()
	if err := s.StartSizer(ctx); err != nil {
		t.Fatal(err)
	}

	// nothing starts on the block that cannot finish before the warning
	long := sbatchTrain(t, s, 1, 1, "-t", "60")
	if st, err := s.Cluster.WaitJobState(ctx, long, "COMPLETED"); err != nil {
		out, _ := os.ReadFile(filepath.Join(s.Cluster.Dir(), "work", "train-"+long+".out"))
		t.Fatalf("job %s: %s %v\n%s", long, st, err, out)
	}
	if in := jobInstance(t, s, long); in.CapacityReservation == cb {
		t.Errorf("job %s (60 min) ran on %s in the Capacity Block, which EC2 warns of in 4 min", long, in.ID)
	}

	id := sbatchTrain(t, s, 330, 5, "-t", "2") // 5.5 min: still running at the warning
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	first := jobInstance(t, s, id)
	if first.CapacityReservation != cb || first.Tags[ec2p.TagBlockEnd] != end.Truncate(time.Second).UTC().Format(time.RFC3339) {
		t.Fatalf("job %s (2 min) ran on %s in reservation %q tagged %q; want the Capacity Block %s, tagged with its end", id, first.ID,
			first.CapacityReservation, first.Tags[ec2p.TagBlockEnd], cb)
	}
	if _, err := s.Cluster.Run(ctx, "scontrol", "update", "jobid="+id, "TimeLimit=30"); err != nil {
		t.Fatalf("lengthening job %s: %v", id, err)
	}
	warn := end.Add(-40 * time.Minute)
	eventually(t, time.Until(warn)+90*time.Second, "the job requeued at the block's warning", func() bool {
		o, _ := s.Cluster.Run(ctx, "scontrol", "show", "job", id)
		return strings.Contains(o, "Restarts=1")
	})
	if requeued := time.Now(); requeued.Before(warn) || !requeued.Before(end.Add(-30*time.Minute)) {
		t.Errorf("requeued at %v; want between EC2's warning %v and its reclaim %v", requeued, warn, end.Add(-30*time.Minute))
	}
	fence, err := s.Cluster.Run(ctx, "scontrol", "show", "reservation", blockwatch.FenceName(first.ID))
	if err != nil || !strings.Contains(fence, "Nodes="+first.Tags[ec2p.TagNode]) || !strings.Contains(fence, "MAINT") {
		t.Errorf("the block node's fence: %v\n%s", err, fence)
	}
	waitJob(t, s, id, 4*time.Minute, "COMPLETED")
	logPath := filepath.Join(s.Cluster.Dir(), "work", "train-"+id+".out")
	b, _ := os.ReadFile(logPath)
	if text := string(b); !strings.Contains(text, "on signal; wrote") || !strings.Contains(text, "resumed from checkpoint") {
		t.Errorf("the job did not checkpoint on the signal and resume from it:\n%s", text)
	}
	if again := jobInstance2(t, s, id, first.ID); again.CapacityReservation == cb {
		t.Errorf("after the warning the job went back on the block (%s)", again.ID)
	}
	if st := s.Emu.CapacityReservations(); len(st) != 1 || st[0].ID != cb {
		t.Errorf("reservations %+v, want the one block", st)
	}
	// the ledger check (every e2e test's end) compares the block's bill
}

// jobInstance2 is the instance launched for job id other than first.
func jobInstance2(t *testing.T, s *stack.Stack, id, first string) ec2emu.Instance {
	t.Helper()
	for _, in := range s.Emu.Instances() {
		if in.Tags[ec2p.TagJobID] == id && in.ID != first {
			return in
		}
	}
	t.Fatalf("no second instance launched for job %s: %+v", id, s.Emu.Instances())
	return ec2emu.Instance{}
}
