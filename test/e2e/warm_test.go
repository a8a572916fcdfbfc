package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/stack"
)

// TestWarmReuse: with one a10g node and two short jobs, the node that
// finishes the first job is handed to the waiting second job instead of
// being released (one instance for both), and the warm-reuse timer then
// releases it once no job wants it.
func TestWarmReuse(t *testing.T) {
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Classes[1].MaxNodes = 1
		c.Teardown.WarmReuse = config.D(8 * time.Second)
	}})
	a := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2")
	b := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2")
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
			{Name: "a10", GPUModel: "a10g", GPUsPerNode: 1, MaxNodes: 1, InstanceTypes: []string{"g5.xlarge"}, Capacity: config.CapacitySpotThenOnDemand},
			{Name: "a100", GPUModel: "a100", GPUsPerNode: 8, MaxNodes: 1, InstanceTypes: []string{"p4d.24xlarge"}, Capacity: config.CapacitySpotThenOnDemand},
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
	resp, err := http.Get(s.Cfg.Sizer.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
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
