package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/hostlist"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// slowBoot boots every instance after delay, so that Slurm's next
// ResumeRate token comes while the job's instances still boot.
func slowBoot(delay time.Duration) func(context.Context, *stack.Stack, ec2emu.Instance, string) error {
	return func(ctx context.Context, s *stack.Stack, in ec2emu.Instance, node string) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		return stack.BootstrapNode(ctx, s, in, node)
	}
}

// resumeCalls reads the resume files burst-resume kept, oldest first.
func resumeCalls(t *testing.T, s *stack.Stack) []slurm.ResumeFile {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(s.Cfg.Sizer.StateDir, "resume-files", "*.json"))
	sort.Strings(files)
	var out []slurm.ResumeFile
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rf, err := slurm.ParseResumeFile(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, rf)
	}
	return out
}

// TestPartialResume: with ResumeRate=1 (a node a minute: from 24.05 a
// token bucket; 22.05 spreads the nodes too) Slurm resumes a 3-node job's
// nodes in several ResumeProgram calls, nodes_resume a subset of
// nodes_alloc (22.05 names only the call's nodes). burst launches the whole
// allocation at the first call as one all-or-nothing fleet; the later calls,
// while the instances boot, launch nothing. The job gets one fleet in one
// pool, no node a second instance, and runs on all three nodes.
func TestPartialResume(t *testing.T) {
	s := start(t, stack.Options{
		Configure: func(c *config.Config) { c.Slurm.ResumeRate = 1 },
		Boot:      slowBoot(60 * time.Second),
	})
	id := sbatch(t, s, "-N3", "--gres=gpu:1", "--constraint=l4", "--wrap", "srun -l printenv SLURMD_NODENAME")
	waitJob(t, s, id, 4*time.Minute, "COMPLETED")

	var calls, partial int
	for _, rf := range resumeCalls(t, s) {
		for _, j := range rf.Jobs {
			if id != "" && j.JobID != parseID(t, id) {
				continue
			}
			calls++
			now, _ := hostlist.Expand(j.Nodes)
			if len(now) < 3 {
				partial++
			}
			t.Logf("ResumeProgram call for job %d: nodes_resume %s, nodes_alloc %s", j.JobID, j.Nodes, j.NodesAlloc)
		}
	}
	if partial == 0 {
		t.Fatalf("Slurm resumed the job's nodes in %d calls, none partial: ResumeRate=1 did not split the job; the test tested nothing", calls)
	}
	if calls < 2 {
		t.Errorf("Slurm made %d ResumeProgram call(s) for the job; want at least 2 (its next token while the instances boot)", calls)
	}

	all := s.Emu.Instances()
	if len(all) != 3 {
		t.Fatalf("%d instances launched, want 3 (one per node, none twice): %+v", len(all), all)
	}
	nodes := map[string]bool{}
	for _, in := range all {
		if in.ClientToken != all[0].ClientToken || in.Zone != all[0].Zone || in.InstanceType != all[0].InstanceType || in.Lifecycle != all[0].Lifecycle {
			t.Errorf("instance %s (%s %s %s, fleet token %s) is not in the fleet and pool of %s (%s %s %s, %s)", in.ID, in.InstanceType, in.Zone,
				in.Lifecycle, in.ClientToken, all[0].ID, all[0].InstanceType, all[0].Zone, all[0].Lifecycle, all[0].ClientToken)
		}
		nodes[in.Tags["burst:nodes"]] = true
	}
	if n := s.Emu.CallCount("CreateFleet"); n != 1 {
		t.Errorf("%d CreateFleet calls, want 1", n)
	}
	for _, e := range s.Events.Events() {
		if e.What == "duplicate instance" {
			t.Errorf("duplicate instance: %s %s", e.Subject, e.Detail)
		}
	}
	out, _ := os.ReadFile(filepath.Join(s.Cluster.Dir(), "work", "slurm-"+id+".out"))
	if strings.Count(string(out), ": l4-") != 3 {
		t.Errorf("srun did not run on 3 nodes:\n%s", out)
	}
	eventually(t, 60*time.Second, "instances terminated", func() bool { return len(liveInstances(s)) == 0 })
}

func parseID(t *testing.T, id string) uint32 {
	t.Helper()
	var n uint32
	for _, c := range id {
		if c < '0' || c > '9' {
			t.Fatalf("job id %q", id)
		}
		n = n*10 + uint32(c-'0')
	}
	return n
}
