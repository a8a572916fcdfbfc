package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestHALeaderKilledDuringResume: two sizers on one PostgreSQL (a
// throwaway server); the first leads, the second stands by. A three-node
// job's resume is under way when the leader is SIGKILLed: the standby
// leads, resume and the rest fail over to it, the job completes, no node
// got two instances, and (the end-of-test check, through the new leader)
// the ledger equals the emulator's bill.
func TestHALeaderKilledDuringResume(t *testing.T) {
	versionBlind(t)
	s, replica := startHA(t, stack.Options{})
	id := sbatch(t, s, "--nodes=3", "--gres=gpu:1", "--constraint=a10g", "--account=demo", "--time=10", "--wrap", "sleep 5")
	eventually(t, time.Minute, "the resume launching", func() bool { return len(s.Emu.Instances()) > 0 })
	t0 := time.Now()
	s.KillSizer()
	eventually(t, time.Minute, "the standby leading", func() bool { return strings.Contains(readFile(replica.Log), "leading the sizers") })
	t.Logf("the standby led %.1f s after the leader was killed", time.Since(t0).Seconds())
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	assertNoDoubleLaunch(t, s)
	if n := len(s.Emu.Instances()); n != 3 {
		t.Errorf("%d instances launched for a three-node job, want 3", n)
	}
}

// TestHALeaderKilledDuringSpotNotice: two sizers on one PostgreSQL; a
// job's instance gets a spot notice and the leading sizer is SIGKILLed at
// that moment: the standby leads (its SQS consumer and reconciler take
// over), the job is requeued once and completes on a new instance, every
// instance is released, and (the end-of-test check, through the new
// leader) the ledger equals the emulator's bill.
func TestHALeaderKilledDuringSpotNotice(t *testing.T) {
	versionBlind(t)
	s, replica := startHA(t, stack.Options{Emulator: ec2emu.Options{NoticePeriod: 30 * time.Second}})
	ctx := context.Background()
	id := sbatch(t, s, "--requeue", "--gres=gpu:1", "--constraint=a10g", "--account=demo", "--time=10", "--wrap", "trap '' USR1; sleep 20") // ignores the checkpoint signal: the agent requeues it after its wait
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	live := liveInstances(s)
	if len(live) != 1 {
		t.Fatalf("want 1 live instance, got %d", len(live))
	}
	if err := s.Emu.Interrupt(live[0].ID); err != nil {
		t.Fatal(err)
	}
	s.KillSizer()
	eventually(t, time.Minute, "the standby leading", func() bool { return strings.Contains(readFile(replica.Log), "leading the sizers") })
	eventually(t, time.Minute, "the job requeued", func() bool {
		o, _ := s.Cluster.Run(ctx, "scontrol", "show", "job", id)
		return strings.Contains(o, "Restarts=1")
	})
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	if o, _ := s.Cluster.Run(ctx, "scontrol", "show", "job", id); !strings.Contains(o, "Restarts=1") {
		t.Errorf("the job was requeued more than once:\n%s", o)
	}
	if in, _ := s.Emu.Instance(live[0].ID); in.State != "terminated" && in.State != "shutting-down" {
		t.Errorf("the interrupted instance %s is %s", live[0].ID, in.State)
	}
	eventually(t, time.Minute, "every instance released", func() bool { return len(liveInstances(s)) == 0 })
}

// startHA starts the stack with its sizer on a throwaway PostgreSQL and a
// second sizer beside it, and waits until the first leads and the second
// stands by. The replica stops after the stack's own clean-up and ledger
// check.
func startHA(t *testing.T, o stack.Options) (*stack.Stack, *stack.Replica) {
	t.Helper()
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	var replica *stack.Replica
	t.Cleanup(func() {
		if replica != nil {
			replica.Stop()
		}
	})
	o.Configure = func(c *config.Config) {
		c.Sizer.Store = config.SizerStore{Driver: "postgres", URL: dsn}
		c.Sizer.ReconcileInterval = config.D(5 * time.Second)
	}
	s := start(t, o)
	var err error
	if replica, err = s.StartReplica(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the first sizer leading and the second standing by", func() bool {
		return strings.Contains(readFile(s.SizerLogPath()), "leading the sizers") && strings.Contains(readFile(replica.Log), "standing by")
	})
	return s, replica
}
