package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/catalog"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/sizer/store"
	"github.com/burst-hpc/burst/test/stack"
)

// onDemandL4 makes class l4 one on-demand type (g6.xlarge), so every
// launch costs one known price: the catalog's.
func onDemandL4(c *config.Config) float64 {
	c.Classes[0].InstanceTypes = []string{"g6.xlarge"}
	c.Classes[0].Capacity = capacity.OnDemand
	t, _ := catalog.Default().Lookup("g6.xlarge")
	return t.OnDemandUSD
}

// jobInfo is a job's state, squeue reason and AdminComment.
func jobInfo(s *stack.Stack, id string) (state, reason, comment string) {
	jobs, err := slurmClient(s).Jobs(context.Background())
	if err != nil {
		return "", "", ""
	}
	for _, j := range jobs {
		if fmt.Sprint(j.ID) == id {
			return j.State, j.Reason, j.AdminComment
		}
	}
	return "", "", ""
}

// held: squeue's reason for a held job (JobHeldAdmin; JobHeldUser here,
// where the jobs are root's own and so are the hooks).
func held(reason string) bool { return strings.HasPrefix(reason, "JobHeld") }

// sampler counts, every 200 ms until stopped, the account's live
// instances and RUNNING jobs, and keeps the most seen at once.
type sampler struct {
	mu                  sync.Mutex
	maxLive, maxRunning int
	stop                chan struct{}
	done                chan struct{}
}

func sample(s *stack.Stack, account string) *sampler {
	sm := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sm.done)
		for {
			// live instances of jobs that hold a reservation (not yet
			// ended: an ended job's instance may still be shutting down
			// beside the next job's, its reservation already released)
			running, live := 0, 0
			if jobs, err := slurmClient(s).Jobs(context.Background()); err == nil {
				active := map[string]bool{}
				for _, j := range jobs {
					if j.Account == account && (j.State == "RUNNING" || j.State == "CONFIGURING") {
						active[fmt.Sprint(j.ID)] = true
						if j.State == "RUNNING" {
							running++
						}
					}
				}
				for _, in := range liveInstances(s) {
					if in.Tags[ec2p.TagAccount] == account && active[in.Tags[ec2p.TagJobID]] {
						live++
					}
				}
			}
			sm.mu.Lock()
			sm.maxLive, sm.maxRunning = max(sm.maxLive, live), max(sm.maxRunning, running)
			sm.mu.Unlock()
			select {
			case <-sm.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return sm
}

func (sm *sampler) end() (maxLive, maxRunning int) {
	close(sm.stop)
	<-sm.done
	return sm.maxLive, sm.maxRunning
}

// TestBudgetReservations: five jobs of an account whose monthly cap fits
// two jobs' reservations (price x time limit): two run at a time, the
// others wait held with the reason in squeue/scontrol, and each one that
// ends releases the next, until all five complete. The reservations are
// counted against the cap while the jobs run.
func TestBudgetReservations(t *testing.T) {
	var price float64
	const limit = 10 * time.Minute
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		price = onDemandL4(c)
		reserve := price * limit.Hours()
		c.Budgets = append(c.Budgets, config.Budget{Account: "capped", MonthlyUSD: 2.6 * reserve})
	}})
	sm := sample(s, "capped")
	var ids []string
	for i := range 5 {
		ids = append(ids, sbatch(t, s, "--account=capped", "--gres=gpu:1", "--constraint=l4", "--time=10", "--job-name=b"+fmt.Sprint(i), "--wrap", "sleep 8"))
	}
	// some wait held, saying why
	sawHeld := ""
	eventually(t, 120*time.Second, "a job held by the budget", func() bool {
		for _, id := range ids {
			if st, reason, comment := jobInfo(s, id); st == "PENDING" && held(reason) && strings.Contains(comment, "monthly budget spent or reserved") {
				sawHeld = id + ": " + comment
				return true
			}
		}
		return false
	})
	t.Logf("held: %s", sawHeld)
	// while two run, the budget API counts their reservations
	c, _ := s.SizerClient(s.Token)
	var reserved float64
	eventually(t, 60*time.Second, "reservations in the budget", func() bool {
		bs, err := c.Budgets(context.Background())
		if err != nil {
			return false
		}
		for _, b := range bs {
			if b.Account == "capped" {
				reserved = b.ReservedUSD
				return b.ReservedUSD > 0
			}
		}
		return false
	})
	t.Logf("capped: reserved $%.4f of the cap", reserved)
	for _, id := range ids {
		waitJob(t, s, id, 6*time.Minute, "COMPLETED")
	}
	maxLive, maxRunning := sm.end()
	if maxLive > 2 || maxRunning > 2 {
		t.Errorf("the cap fits two reservations; saw %d live instances of unfinished jobs and %d running jobs at once", maxLive, maxRunning)
	}
	if maxRunning < 1 {
		t.Errorf("no job seen running")
	}
	launched := 0
	for _, in := range s.Emu.Instances() {
		if in.Tags[ec2p.TagAccount] == "capped" {
			launched++
		}
	}
	t.Logf("5 jobs ran on %d instances; at most %d live and %d running at once", launched, maxLive, maxRunning)
	// the report names every job with its spend, on-demand equivalent and saving
	rep, err := c.UsageReport(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range rep.Jobs {
		if j.Account == "capped" && j.SpendUSD > 0 {
			n++
		}
	}
	if n != 5 {
		t.Errorf("report lists %d of the 5 jobs with spend: %+v", n, rep.Jobs)
	}
}

// TestBudgetSizerDown: with the sizer stopped, a capped account's job
// launches on the spend read from the state database (read-only) and the
// journal; with the database unavailable too, the capped account's next
// job is held with the reason while an uncapped account's job launches;
// once the sizer is back, the held job is released and runs.
func TestBudgetSizerDown(t *testing.T) {
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		onDemandL4(c)
		c.Sizer.ReconcileInterval = config.D(5 * time.Second)
		c.Budgets = append(c.Budgets, config.Budget{Account: "capped", MonthlyUSD: 50})
	}})
	ctx := context.Background()
	s.StopSizer()
	a := sbatch(t, s, "--account=capped", "--gres=gpu:1", "--constraint=l4", "--time=10", "--wrap", "sleep 1")
	waitJob(t, s, a, 90*time.Second, "COMPLETED")
	if log, _ := os.ReadFile(s.LogPath()); !strings.Contains(string(log), "budget checked from the state database (sizer unavailable)") {
		t.Errorf("the capped job was not checked through the local path")
	}
	// the state database gone as well: the capped account's spend is unknown
	db := filepath.Join(s.Cfg.Sizer.StateDir, store.FileName)
	for _, suf := range []string{"", "-wal", "-shm"} {
		os.Rename(db+suf, db+suf+".away")
	}
	b := sbatch(t, s, "--account=capped", "--gres=gpu:1", "--constraint=l4", "--time=10", "--wrap", "sleep 1")
	u := sbatch(t, s, "--account=free", "--gres=gpu:1", "--constraint=l4", "--time=10", "--wrap", "sleep 1")
	eventually(t, 90*time.Second, "the capped job held", func() bool {
		st, reason, comment := jobInfo(s, b)
		return st == "PENDING" && held(reason) && strings.Contains(comment, "spend of account capped cannot be known now")
	})
	waitJob(t, s, u, 90*time.Second, "COMPLETED")
	if st, _, _ := jobInfo(s, b); st != "PENDING" {
		t.Fatalf("the capped job left PENDING (%s) while its spend was unknown", st)
	}
	// the sizer and its database back: the held job is released and runs
	for _, suf := range []string{"", "-wal", "-shm"} {
		os.Rename(db+suf+".away", db+suf)
	}
	if err := s.StartSizer(ctx); err != nil {
		t.Fatal(err)
	}
	waitJob(t, s, b, 3*time.Minute, "COMPLETED")
}

// TestLimitGPUs: an account limited to 2 concurrent GPUs submits four
// one-GPU jobs: never more than two run (sampled throughout), the others
// wait held with the reason, and all four complete.
func TestLimitGPUs(t *testing.T) {
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Limits = []config.Limit{{Account: "lim", MaxGPUs: 2}}
		c.Sizer.ReconcileInterval = config.D(5 * time.Second)
	}})
	sm := sample(s, "lim")
	var ids []string
	for i := range 4 {
		ids = append(ids, sbatch(t, s, "--account=lim", "--gres=gpu:1", "--constraint=l4", "--job-name=l"+fmt.Sprint(i), "--wrap", "sleep 8"))
	}
	heldJob := ""
	eventually(t, 120*time.Second, "a job held by the limit", func() bool {
		for _, id := range ids {
			if st, reason, comment := jobInfo(s, id); st == "PENDING" && held(reason) && strings.Contains(comment, "account lim holds 2 of its 2 GPUs") {
				// what the user runs to see why
				out, err := s.Cluster.Run(context.Background(), "squeue", "-h", "-j", id, "-O", "jobid,reason,admin_comment:200")
				heldJob = strings.TrimSpace(out)
				if err != nil || !strings.Contains(out, "account lim holds 2 of its 2 GPUs") {
					t.Errorf("squeue -O jobid,reason,admin_comment does not show why: %q %v", out, err)
				}
				return true
			}
		}
		return false
	})
	t.Logf("held: %s", heldJob)
	for _, id := range ids {
		waitJob(t, s, id, 6*time.Minute, "COMPLETED")
	}
	maxLive, maxRunning := sm.end()
	t.Logf("at most %d live instances and %d running jobs of account lim at once", maxLive, maxRunning)
	if maxLive > 2 || maxRunning > 2 {
		t.Errorf("limit 2 GPUs: saw %d live instances and %d running jobs at once", maxLive, maxRunning)
	}
}
