package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/pgtest"
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
	pg := pgtest.Start(t)
	dsn := pg.NewDatabase(t)
	var replica *stack.Replica
	t.Cleanup(func() { // after the stack's own clean-up and ledger check
		if replica != nil {
			replica.Stop()
		}
	})
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Sizer.Store = config.SizerStore{Driver: "postgres", URL: dsn}
		c.Sizer.ReconcileInterval = config.D(5 * time.Second)
	}})
	ctx := context.Background()
	var err error
	if replica, err = s.StartReplica(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the first sizer leading and the second standing by", func() bool {
		return strings.Contains(readFile(s.SizerLogPath()), "leading the sizers") && strings.Contains(readFile(replica.Log), "standing by")
	})
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
