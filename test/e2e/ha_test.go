package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/pgtest"
	"github.com/burst-hpc/burst/sizer/spend"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestHALeaderKilledDuringResume: two sizers on one PostgreSQL (a
// throwaway server); the first leads, the second stands by. A 20-node
// job's resume is under way (its instances launching and booting, each a
// node namespace with burst's bootstrap and slurmd) when the leader is
// SIGKILLed: the standby leads, resume, the booting nodes and the rest
// fail over to it, the job completes, every node got exactly one
// instance, every instance was terminated once, and (the end-of-test
// check, through the new leader) the ledger equals the emulator's bill.
func TestHALeaderKilledDuringResume(t *testing.T) {
	versionBlind(t)
	const nodes = 20
	s, replica := startHA(t, stack.Options{Configure: func(c *config.Config) {
		c.Classes[1].MaxNodes = nodes // a10g
		// 20 nodes boot on this machine's 2 shared cores: Slurm waits for
		// them as a site waits for its slowest boot
		c.Slurm.ResumeTimeout = config.D(5 * time.Minute)
	}})
	t0 := time.Now()
	id := sbatch(t, s, fmt.Sprintf("--nodes=%d", nodes), "--gres=gpu:1", "--constraint=a10g", "--account=demo", "--time=10", "--wrap", "sleep 5")
	eventually(t, time.Minute, "the resume launching", func() bool { return len(s.Emu.Instances()) > 0 })
	tk := time.Now()
	s.KillSizer()
	eventually(t, time.Minute, "the standby leading", func() bool { return strings.Contains(readFile(replica.Log), "leading the sizers") })
	t.Logf("the standby led %.1f s after the leader was killed, %d of %d instances launched then", time.Since(tk).Seconds(), len(s.Emu.Instances()), nodes)
	waitJob(t, s, id, 8*time.Minute, "RUNNING", "COMPLETED")
	t.Logf("the %d-node job started %.0f s after it was submitted", nodes, time.Since(t0).Seconds())
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	assertNoDoubleLaunch(t, s)
	if n := len(s.Emu.Instances()); n != nodes {
		t.Errorf("%d instances launched for a %d-node job, want %d", n, nodes, nodes)
	}
	eventually(t, 3*time.Minute, "every instance released", func() bool { return len(liveInstances(s)) == 0 })
	assertTerminatedOnce(t, s)
}

// assertTerminatedOnce: no instance was named by more than one successful
// TerminateInstances call (one instance ended once, by one owner).
func assertTerminatedOnce(t *testing.T, s *stack.Stack) {
	t.Helper()
	calls := map[string]int{}
	for _, c := range s.Emu.Calls() {
		if c.Action != "TerminateInstances" || c.Code != "" {
			continue
		}
		for k, v := range c.Params {
			if strings.HasPrefix(k, "InstanceId.") {
				for _, id := range v {
					calls[id]++
				}
			}
		}
	}
	for id, n := range calls {
		if n > 1 {
			t.Errorf("instance %s terminated by %d calls", id, n)
		}
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
	configure := o.Configure
	o.Configure = func(c *config.Config) {
		c.Sizer.Store = config.SizerStore{Driver: "postgres", URL: dsn}
		c.Sizer.ReconcileInterval = config.D(5 * time.Second)
		if configure != nil {
			configure(c)
		}
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

// TestHANoStoreIsSQLite: with no sizer.store in burst.yaml, burst runs as
// it did before PostgreSQL: one sizer on SQLite in sizer.state_dir,
// leading at once with no election to wait for (its SQS consumer records
// the instance's start from EC2's event, its ledger sync answers), budget
// admissions decided in the admissions file beside it, and (the end-of-test
// check) the ledger equals the emulator's bill.
func TestHANoStoreIsSQLite(t *testing.T) {
	versionBlind(t)
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Sizer.ReconcileInterval = config.D(5 * time.Second)
		c.Budgets = append(c.Budgets, config.Budget{Account: "capped", MonthlyUSD: 50})
	}})
	cfg, err := config.Load(s.CfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sizer.Store != (config.SizerStore{}) {
		t.Fatalf("burst.yaml configures a store: %+v", cfg.Sizer.Store)
	}
	id := sbatch(t, s, "--account=capped", "--gres=gpu:1", "--constraint=l4", "--time=10", "--wrap", "sleep 2")
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	if _, err := os.Stat(filepath.Join(s.Cfg.Sizer.StateDir, admit.FileName)); err != nil {
		t.Errorf("the capped job was not admitted through the admissions file: %v", err)
	}
	if log := readFile(s.SizerLogPath()); strings.Contains(log, "standing by") || strings.Contains(strings.ToLower(log), "postgres") {
		t.Errorf("the only sizer stood by or spoke of PostgreSQL:\n%s", log)
	}
	c, err := s.SizerClient(s.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.LedgerSync(context.Background()); err != nil {
		t.Errorf("the only sizer does not run the ledger: %v", err)
	}
	st, err := store.OpenReadOnly(s.Cfg.Sizer.StateDir) // the SQLite file, read as `report --local` does
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Driver() != store.DriverSQLite {
		t.Errorf("the state directory's store is %s", st.Driver())
	}
	l, err := spend.Ledger(context.Background(), st, s.Cfg.Accounting.IdleOwner, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, in := range l.Instances {
		if in.JobID == id {
			found = true
			if in.Account != "capped" || in.StartSource != "ec2-event" {
				t.Errorf("the job's instance in SQLite: account %q, start from %q; want capped, from EC2's event (the SQS consumer)", in.Account, in.StartSource)
			}
		}
	}
	if !found {
		t.Errorf("the job's instance is not in %s: %+v", st.Path(), l.Instances)
	}
}
