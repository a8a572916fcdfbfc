package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/stack"
)

// TestFaultLaunchFailedWait: every pool of the a10g class is dry (spot and
// on-demand), so burst hands the nodes of two jobs back, one plain and one
// --no-requeue; capacity returns at once. It measures how long the plain
// job then waits before it runs again and what becomes of the --no-requeue
// job, with the burst.conf burst-slurm-conf writes (from 25.05 it holds
// SchedulerParameters=requeue_on_resume_failure) and, from 25.05, with a
// site's own SchedulerParameters without it. The waits are logged, not
// judged. What must hold: the plain job is requeued and runs; from 25.05,
// with burst.conf, the --no-requeue job is requeued too (it never ran) and
// runs; nothing is left running.
func TestFaultLaunchFailedWait(t *testing.T) {
	v, err := harnessRelease()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("burst.conf", func(t *testing.T) { launchFailedWait(t, "", v.AtLeast(25, 5)) })
	if !v.AtLeast(25, 5) {
		// not a skip: there is no second case before 25.05
		t.Logf("Slurm %s: burst.conf has no requeue_on_resume_failure (25.05+); the burst.conf run is the only case", v)
		return
	}
	t.Run("without_requeue_on_resume_failure", func(t *testing.T) {
		launchFailedWait(t, "SchedulerParameters=bf_interval=30\n", false)
	})
}

// launchFailedWait runs one case; conf is added to slurm.conf after
// burst.conf; keep says the --no-requeue job must be requeued.
func launchFailedWait(t *testing.T, conf string, keep bool) {
	s := faultStart(t, 0, stack.Options{SlurmConf: conf})
	// no capacity of either kind: a --no-requeue job is sized on demand
	// only (spot only for a job that may be requeued)
	pools := func(n int) {
		for _, typ := range []string{"g5.xlarge", "g5.2xlarge"} {
			for _, z := range []string{"us-east-1a", "us-east-1b"} {
				s.Emu.SetCapacity(typ, z, "spot", n)
				s.Emu.SetCapacity(typ, z, "on-demand", n)
			}
		}
	}
	pools(0)
	ctx := context.Background()
	plain := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 1")
	noRequeue := sbatch(t, s, "--no-requeue", "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 1")
	var handedBack time.Time
	eventually(t, 90*time.Second, "both jobs' nodes handed back with burst's reason", func() bool {
		n := 0
		for _, node := range []string{"a10g-1", "a10g-2", "a10g-3", "a10g-4"} {
			if strings.HasPrefix(nodeField(s, node, "Reason"), "burst: ") {
				n++
			}
		}
		handedBack = time.Now()
		return n >= 2
	})
	// capacity returns at once: from here on a launch would succeed
	pools(-1)
	os.Remove(filepath.Join(s.Cfg.Sizer.StateDir, ec2p.UnavailableFile))
	eventually(t, 60*time.Second, "job "+plain+" requeued (pending)", func() bool {
		st, _, err := s.Cluster.JobState(ctx, plain)
		return err == nil && st == "PENDING"
	})
	show := func(id string) string {
		out, _ := s.Cluster.Run(ctx, "scontrol", "show", "job", "-o", id)
		var keep []string
		for _, f := range strings.Fields(out) {
			for _, k := range []string{"JobState=", "Reason=", "Restarts=", "Requeue=", "EligibleTime=", "StartTime=", "ExitCode="} {
				if strings.HasPrefix(f, k) {
					keep = append(keep, f)
				}
			}
		}
		return strings.Join(keep, " ")
	}
	t.Logf("plain job %s after the hand-back: %s", plain, show(plain))
	t.Logf("--no-requeue job %s after the hand-back: %s", noRequeue, show(noRequeue))
	waitJob(t, s, plain, 6*time.Minute, "RUNNING", "COMPLETED")
	wait := time.Since(handedBack)
	waitJob(t, s, plain, 2*time.Minute, "COMPLETED")
	st, _, _ := s.Cluster.JobState(ctx, noRequeue)
	// wait through every state that is not an end state: COMPLETING too
	// (26.05+rest once caught the job there and judged the transient state)
	if !slices.Contains(harness.TerminalJobStates, st) {
		st = waitJob(t, s, noRequeue, 6*time.Minute, harness.TerminalJobStates...)
	}
	t.Logf("Slurm %s, SchedulerParameters from %s: launch failed -> plain job running again after %.1f s (restarts %d); --no-requeue job ends %s: %s",
		s.Cluster.Slurm().Release, map[bool]string{true: "burst.conf", false: "burst.conf, then " + strings.TrimSpace(conf)}[conf == ""],
		wait.Seconds(), restarts(s, plain), st, show(noRequeue))
	if keep && st != "COMPLETED" {
		t.Errorf("the --no-requeue job whose launch failed ended %s; with requeue_on_resume_failure Slurm requeues it", st)
	}
	assertClean(t, s, 2*time.Minute)
}

// harnessRelease is the release of the Slurm BURST_SLURM selects.
func harnessRelease() (slurm.Version, error) {
	sl, err := harness.SelectedSlurm()
	if err != nil {
		return slurm.Version{}, err
	}
	return slurm.ParseVersion(sl.Release)
}
