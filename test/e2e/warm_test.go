package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/test/stack"
)

// TestWarmReuse: with one a10g node and two short jobs, the node that
// finishes the first job is handed to the waiting second job instead of
// being released (one instance for both), and the warm-reuse timer then
// releases it once no job wants it. The instance's bill is split by
// Slurm's start and end of each job on the node: the second job (another
// account) pays for its own run, the first for its run and the boot and
// idle time (accounting.idle_owner: launching-job).
func TestWarmReuse(t *testing.T) {
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Classes[1].MaxNodes = 1
		c.Teardown.WarmReuse = config.D(8 * time.Second)
	}})
	a := sbatch(t, s, "--account=nlp", "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2")
	b := sbatch(t, s, "--account=bio", "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2")
	waitJob(t, s, a, 90*time.Second, "COMPLETED")
	waitJob(t, s, b, 60*time.Second, "COMPLETED")
	if n := len(s.Emu.Instances()); n != 1 {
		t.Errorf("want the second job on the warm node (1 instance), got %d instances", n)
	}
	// no job wants the node any more: released after the window
	eventually(t, 40*time.Second, "the warm node released", func() bool { return len(liveInstances(s)) == 0 })
	log, _ := os.ReadFile(s.LogPath())
	if n := strings.Count(string(log), "keeping node warm"); n != 1 {
		t.Errorf("%d 'keeping node warm' decisions, want 1", n)
	}
	if !strings.Contains(string(log), "warm-reuse window over") && !strings.Contains(string(log), "released at job end") {
		t.Errorf("no release after the warm-reuse window in the log")
	}
	checkWarmCharges(t, s, a, b)
}

// checkWarmCharges: after the instance ended, job b's charge is its run as
// Slurm timed it (to the second), the idle owner is job a, and the
// charges add up to the instance's bill.
func checkWarmCharges(t *testing.T, s *stack.Stack, a, b string) {
	t.Helper()
	ctx := context.Background()
	c, _ := s.SizerClient(s.Token)
	var l sizerapi.Ledger
	eventually(t, 60*time.Second, "the instance closed in the ledger", func() bool {
		if _, err := c.LedgerSync(ctx); err != nil {
			return false
		}
		var err error
		l, err = c.Ledger(ctx)
		return err == nil && len(l.Instances) == 1 && !l.Instances[0].Open
	})
	in := l.Instances[0]
	got := map[string]sizerapi.Charge{}
	sum := 0.0
	for _, ch := range l.Charges {
		got[ch.Kind+":"+ch.JobID] = ch
		sum += ch.USD
	}
	if math.Abs(sum-in.USD) > 1e-9 {
		t.Errorf("charges add up to $%.6f, the bill is $%.6f: %+v", sum, in.USD, l.Charges)
	}
	jb, ja, idle := got["job:"+b], got["job:"+a], got["idle:"+a]
	if jb.Account != "bio" || ja.Account != "nlp" || idle.Account != "nlp" {
		t.Errorf("charges %+v", l.Charges)
	}
	// Slurm's own start and end of job b
	out, _ := s.Cluster.Run(ctx, "scontrol", "show", "job", "-o", b)
	var st, en time.Time
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "StartTime="); ok {
			st, _ = time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
		}
		if v, ok := strings.CutPrefix(f, "EndTime="); ok {
			en, _ = time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
		}
	}
	if run := en.Sub(st).Seconds(); st.IsZero() || math.Abs(jb.Seconds-run) > 2 {
		t.Errorf("job %s charged %.1f s; Slurm ran it %.0f s (%v to %v)", b, jb.Seconds, run, st, en)
	}
	t.Logf("instance %s: %d s $%.6f; job %s (nlp) %.1f s, job %s (bio) %.1f s, idle and boot (job %s) %.1f s",
		in.InstanceID, in.BilledSeconds, in.USD, a, ja.Seconds, b, jb.Seconds, a, idle.Seconds)
}

// TestWarmReuseExactClass: warm reuse matches classes exactly. Classes a10
// (1 x A10G) and a100 (8 x A100), one node each. While both nodes run a
// job, a job for a100 and then one for a10 wait. When the a10 job ends,
// its node is kept for the waiting a10 job, never for the a100 job ahead
// of it in the queue ("a10" is a prefix of "a100", which substring matching
// took for a fit); when the a100 job ends, its node is kept for the a100
// job. Each waiting job runs on a node of its own class.
func TestWarmReuseExactClass(t *testing.T) {
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Classes = []config.Class{
			{Name: "a10", GPUModel: "a10g", GPUsPerNode: 1, MaxNodes: 1, InstanceTypes: []string{"g5.xlarge"}, Capacity: capacity.SpotThenOnDemand},
			{Name: "a100", GPUModel: "a100", GPUsPerNode: 8, MaxNodes: 1, InstanceTypes: []string{"p4d.24xlarge"}, Capacity: capacity.SpotThenOnDemand},
		}
		c.Teardown.WarmReuse = config.D(30 * time.Second)
	}})
	long := sbatch(t, s, "--exclusive", "--gres=gpu:1", "--constraint=a100", "--wrap", "sleep 12")
	short := sbatch(t, s, "--gres=gpu:1", "--constraint=a10", "--wrap", "sleep 2")
	waitJob(t, s, long, 2*time.Minute, "RUNNING")
	waitJob(t, s, short, 2*time.Minute, "RUNNING")
	wantA100 := sbatch(t, s, "--exclusive", "--gres=gpu:1", "--constraint=a100", "--wrap", "sleep 1")
	wantA10 := sbatch(t, s, "--gres=gpu:1", "--constraint=a10", "--wrap", "sleep 1")
	for _, id := range []string{short, long, wantA100, wantA10} {
		waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	}
	if n := showJob(t, s, wantA10).Nodes; n != "a10-1" {
		t.Errorf("the a10 job ran on %s, want a10-1", n)
	}
	if n := showJob(t, s, wantA100).Nodes; n != "a100-1" {
		t.Errorf("the a100 job ran on %s, want a100-1", n)
	}
	log, _ := os.ReadFile(s.LogPath())
	keeps := map[string]string{} // node -> waiting job it was kept for
	for _, l := range strings.Split(string(log), "\n") {
		if !strings.Contains(l, `"msg":"keeping node warm for a waiting job"`) {
			continue
		}
		var e struct {
			Node       string `json:"node"`
			WaitingJob uint32 `json:"waiting_job"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		keeps[e.Node] += fmt.Sprint(e.WaitingJob) + " "
	}
	if got, want := strings.TrimSpace(keeps["a10-1"]), wantA10; got != want {
		t.Errorf("a10-1 kept for job(s) %q, want only the a10 job %s (the a100 job is %s)", got, want, wantA100)
	}
	if got, want := strings.TrimSpace(keeps["a100-1"]), wantA100; got != want {
		t.Errorf("a100-1 kept for job(s) %q, want only the a100 job %s (the a10 job is %s)", got, want, wantA10)
	}
	// one instance per node: both waiting jobs reused a warm node
	if n := len(s.Emu.Instances()); n != 2 {
		t.Errorf("%d instances, want 2 (one per class, each reused)", n)
	}
	// each node's boot, phase by phase, is in the sizer's metrics
	body, err := s.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{"a10", "a100"} {
		// (mount is skipped, and not observed, on the node that finds the
		// shared test directory mounted by the other)
		for _, phase := range []string{"ec2-pending-to-bootstrap", "userdata", "mount", "slurmd", "register", "agent", "bootstrap-total"} {
			sum := fmt.Sprintf(`burst_boot_phase_seconds_sum{class=%q,phase=%q} `, class, phase)
			i := strings.Index(string(body), sum)
			if i < 0 && phase != "mount" {
				t.Errorf("metrics lack %s", strings.TrimSpace(sum))
			}
			if i < 0 {
				continue
			}
			v, _, _ := strings.Cut(string(body)[i+len(sum):], "\n")
			t.Logf("boot phase %s %s: %s s", class, phase, v)
		}
	}
}
