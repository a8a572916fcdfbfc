package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/test/stack"
)

// TestSizing runs issue 15's four cases on real Slurm with cli_filter on,
// the sizer daemon, simulated GPUs (the test stack's
// sizer.accept_simulated_gpus) and nodes booted by burst's bootstrap:
//
//	(a) a metadata-only job whose deadline one node cannot meet gets
//	    several nodes, launched all-or-nothing, and examples/train runs on
//	    all of them (the PyTorch DDP template, and train.sh);
//	(b) a job whose measured use is low, then a run of it sized smaller;
//	(c) a job that ends out of GPU memory, then a run of it sized larger;
//	(d) an explicit --gres=gpu:8 job that stays at 8 GPUs;
//
// and that a request predicted to run out of GPU memory is refused at
// submission with the numbers.
func TestSizing(t *testing.T) {
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Slurm.CliFilter = true
		c.Sizing.LearnAfterRuns = 1   // one measured run is enough here
		c.Agent.SimMemoryPercent = 20 // simulated jobs use 20% of each GPU
		c.Agent.ReportInterval = config.D(2 * time.Second)
		c.Teardown.WarmReuse = config.D(0) // each job gets its own nodes
		c.Classes = append(c.Classes, config.Class{Name: "l4x8", GPUModel: "l4", GPUsPerNode: 8, MaxNodes: 1,
			InstanceTypes: []string{"g6.48xlarge"}, Capacity: capacity.SpotThenOnDemand})
	}})
	ctx := context.Background()
	submit := func(t *testing.T, args ...string) (id, said string) {
		t.Helper()
		cmd := s.Cluster.UserCommand(ctx, s.Cluster.User(), "sbatch", append([]string{"--parsable", "--account=demo"}, args...)...)
		cmd.Env = append(cmd.Env, "TRAIN_STEPS=4", "TRAIN_STEP_SECONDS=1")
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("sbatch %v: %v\n%s", args, err, se.String())
		}
		id, _, _ = strings.Cut(strings.TrimSpace(so.String()), ";")
		t.Logf("sbatch %v -> job %s\n%s", args, id, se.String())
		return id, se.String()
	}
	show := func(t *testing.T, id string) string {
		t.Helper()
		out, err := s.Cluster.Run(ctx, "scontrol", "show", "job", "-o", id)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	field := func(job, name string) string {
		m := regexp.MustCompile(`\b` + name + `=(\S*)`).FindStringSubmatch(job)
		if m == nil {
			return ""
		}
		if name == "NumNodes" { // "3-3" is min-max
			lo, _, _ := strings.Cut(m[1], "-")
			return lo
		}
		return m[1]
	}
	routeJSON := func(t *testing.T, args ...string) sizing.Decision {
		t.Helper()
		// as the jobs' user: the history burst learns from is per user
		cmd := exec.Command(filepath.Join(binDir, "burst-sizer"), append([]string{"--config", s.CfgPath, "route", "--json", "--account=demo", "--user=" + s.Cluster.User().Name}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("route --json %v: %v", args, err)
		}
		var d sizing.Decision
		if err := json.Unmarshal(out, &d); err != nil {
			t.Fatalf("route --json printed %q: %v", out, err)
		}
		t.Logf("burst-sizer route --json %s\n%s", strings.Join(args, " "), out)
		return d
	}
	instancesOf := func(id string) []string {
		var zones []string
		for _, in := range s.Emu.Instances() {
			if in.Tags[ec2p.TagJobID] == id {
				zones = append(zones, in.Zone)
			}
		}
		return zones
	}

	// 1B full fine-tune, 160M tokens: 6 x (1e9 + 2 x 16 x 2048 x 2048) x
	// 160e6 FLOPs is about 9.5 h on one L4 or A10G at the MFU
	// internal/sizing/mfu.go gives a 1B model there (26%); over TCP (0.70
	// per extra node) 3 nodes take about 4.6 h, 2 nodes 6.8 h.
	deadlineJob := "--comment=burst: params=1B tokens=160M workload=finetune deadline=5h checkpoint=1m checkpoint_signal=USR1"
	scaledOut := func(t *testing.T, name string) sizing.Decision {
		t.Helper()
		d := routeJSON(t, deadlineJob, "--job-name="+name)
		if d.Nodes != 3 || !d.MeetsDeadline || d.EstHours > 5 || !strings.Contains(d.Reason, "1 node(s) would take") {
			t.Fatalf("route: want 3 nodes meeting 5 h, got %d nodes %.2f h", d.Nodes, d.EstHours)
		}
		return d
	}
	checkLaunch := func(t *testing.T, id string, d sizing.Decision, said string) {
		t.Helper()
		job := show(t, id)
		// 22.05 shows gres:gpu:TYPE:N and a pending job's NumNodes=3;
		// 24.11+ gres/gpu:TYPE:N and NumNodes=3-3
		n := field(job, "NumNodes")
		if n != "3" && n != "3-3" || !(strings.Contains(job, "gres:gpu:"+d.GPUModel+":1") || strings.Contains(job, "gres/gpu:"+d.GPUModel+":1")) {
			t.Fatalf("job not sized to 3 nodes of %s: %s", d.GPUModel, job)
		}
		if !strings.Contains(said, "burst: "+d.Class+": 3 node(s)") {
			t.Errorf("the user was not told: %q", said)
		}
		waitJob(t, s, id, 4*time.Minute, "COMPLETED")
		zones := instancesOf(id)
		if len(zones) != 3 || zones[0] != zones[1] || zones[1] != zones[2] {
			t.Errorf("want 3 instances in one zone (one all-or-nothing launch), got %v", zones)
		}
	}

	t.Run("a: deadline scales the PyTorch DDP template out over 3 nodes, all or nothing", func(t *testing.T) {
		py := torchPython(t, s)
		d := scaledOut(t, "burst-ddp")
		dir := jobFiles(t, s, "train-ddp.sbatch", "ddp-node.sh", "ddp.py")
		work := filepath.Join(s.Cluster.Dir(), "work")
		cmd := s.Cluster.UserCommand(ctx, s.Cluster.User(), "sbatch", "--parsable", "--account=demo", "--chdir="+work, deadlineJob, filepath.Join(dir, "train-ddp.sbatch"),
			"--seed", "7", "--samples", "512", "--batch-size", "16", "--epochs", "1", "--features", "16", "--hidden", "32", "--classes", "10",
			"--checkpoint-every", "10", "--timeout", "60")
		cmd.Env = append(cmd.Env, "DDP_DIR="+dir, "DDP_PYTHON="+py, "DDP_NPROC_PER_NODE=1")
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Run(); err != nil {
			t.Fatalf("sbatch train-ddp.sbatch: %v\n%s", err, se.String())
		}
		id := strings.TrimSpace(so.String())
		checkLaunch(t, id, d, se.String())
		out, _ := os.ReadFile(filepath.Join(work, "ddp-"+id+".out"))
		ranks := map[string]bool{}
		for _, m := range regexp.MustCompile(`rank=(\d) pid \d+ up: 3 ranks`).FindAllStringSubmatch(string(out), -1) {
			ranks[m[1]] = true
		}
		if len(ranks) != 3 || !strings.Contains(string(out), "weights sha256") {
			t.Errorf("DDP did not train on 3 ranks (%v):\n%s", ranks, out)
		}
	})

	t.Run("a: deadline scales train.sh out over 3 nodes, one rank per node", func(t *testing.T) {
		d := scaledOut(t, "burst-train-example")
		script := filepath.Join(jobFiles(t, s, "train.sh"), "train.sh")
		id, said := submit(t, deadlineJob, script)
		checkLaunch(t, id, d, said)
		out, _ := os.ReadFile(filepath.Join(s.Cluster.Dir(), "work", "train-"+id+".out"))
		nodes := map[string]bool{}
		for _, m := range regexp.MustCompile(`rank (\d)/3 on (\S+): step 4 done`).FindAllStringSubmatch(string(out), -1) {
			nodes[m[2]] = true
		}
		if len(nodes) != 3 || !strings.Contains(string(out), "done: 4 steps") {
			t.Errorf("train.sh did not finish on 3 nodes (%v):\n%s", nodes, out)
		}
	})

	t.Run("b: low measured use sizes the next run smaller", func(t *testing.T) {
		// 20B in bf16 is 40 GB of weights: two 22 GiB GPUs by the model
		args := []string{"--job-name=serve", "--comment=burst: params=20B workload=inference capacity=spot"}
		d := routeJSON(t, args...)
		if d.Nodes*d.GPUsPerNode < 2 {
			t.Fatalf("the model needs 2 GPUs: %+v", d)
		}
		id, _ := submit(t, append(args, "--wrap", "sleep 25")...)
		first := show(t, id)
		waitJob(t, s, id, 3*time.Minute, "COMPLETED")
		var learned sizing.Decision
		eventually(t, 60*time.Second, "the measured run in the sizer's history", func() bool {
			learned = routeJSON(t, args...)
			return learned.Downsized
		})
		if learned.Nodes*learned.GPUsPerNode >= d.Nodes*d.GPUsPerNode || !strings.Contains(learned.Reason, "learned: your last 1 runs of serve") {
			t.Fatalf("not sized smaller from history: %+v", learned)
		}
		id2, said := submit(t, append(args, "--wrap", "true")...)
		second := show(t, id2)
		n1, _ := strconv.Atoi(field(first, "NumNodes"))
		n2, _ := strconv.Atoi(field(second, "NumNodes"))
		if n2 >= n1 && field(second, "TresPerNode") == field(first, "TresPerNode") {
			t.Errorf("second run not smaller: %s vs %s", field(second, "NumNodes"), field(first, "NumNodes"))
		}
		if !strings.Contains(said, "learned") {
			t.Errorf("the user was not told what was learned: %q", said)
		}
		s.Cluster.Run(ctx, "scancel", id2)
	})

	t.Run("c: a run out of GPU memory sizes the next run larger", func(t *testing.T) {
		args := []string{"--job-name=oomjob", "--comment=burst: params=1B workload=finetune"}
		before := routeJSON(t, args...)
		id, _ := submit(t, append(args, "--wrap", "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; exit 1")...)
		waitJob(t, s, id, 3*time.Minute, "FAILED", "COMPLETED")
		var after sizing.Decision
		eventually(t, 30*time.Second, "the OOM run in the history", func() bool {
			after = routeJSON(t, args...)
			return after.Upsized
		})
		had := before.Nodes * before.GPUsPerNode
		if after.Nodes*after.GPUsPerNode <= had && after.GPUModel == before.GPUModel || !strings.Contains(after.Reason, "CUDA out of memory") {
			t.Fatalf("not sized larger after the OOM: before %+v after %+v", before, after)
		}
		id2, _ := submit(t, append(args, "--wrap", "true")...)
		job := show(t, id2)
		if field(job, "NumNodes") == "1" && strings.Contains(job, "gres:gpu:"+before.GPUModel+":1") {
			t.Errorf("second run got the same size: %s", job)
		}
		s.Cluster.Run(ctx, "scancel", id2)
	})

	t.Run("attack: output symlinked to another file is not read for OOM markers", func(t *testing.T) {
		// a job could point its output at a file it may not read, hoping
		// the epilog (SlurmUser) reports what it contains
		work := filepath.Join(s.Cluster.Dir(), "work")
		secret := filepath.Join(s.Dir, "secret")
		if err := os.WriteFile(secret, []byte("torch.OutOfMemoryError: CUDA out of memory\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, filepath.Join(work, "evil.out")); err != nil {
			t.Fatal(err)
		}
		args := []string{"--job-name=evil", "--comment=burst: params=1B workload=finetune"}
		id, _ := submit(t, append(args, "--output=evil.out", "--open-mode=append", "--wrap", "exit 1")...)
		waitJob(t, s, id, 3*time.Minute, "FAILED", "COMPLETED")
		log, _ := os.ReadFile(s.LogPath())
		eventually(t, 30*time.Second, "the job's end recorded", func() bool {
			log, _ = os.ReadFile(s.LogPath())
			return regexp.MustCompile(`job end recorded for learning.*"job":` + id + `\b`).Match(log)
		})
		if regexp.MustCompile(`"job":` + id + `,.*"oom":true`).Match(log) {
			t.Errorf("the epilog followed the symlink and reported an OOM")
		}
		if d := routeJSON(t, args...); d.Upsized {
			t.Errorf("sized up from a file the job pointed at: %+v", d)
		}
	})

	t.Run("d: an explicit --gres=gpu:8 stays at 8 GPUs", func(t *testing.T) {
		args := []string{"--gres=gpu:8", "--comment=burst: params=1B workload=finetune"}
		d := routeJSON(t, args...)
		if d.GPUsPerNode != 8 || d.Suggestion == "" {
			t.Fatalf("route: %+v", d)
		}
		id, said := submit(t, append(args, "--wrap", "echo gpus=$CUDA_VISIBLE_DEVICES")...)
		job := show(t, id)
		if !(strings.Contains(job, "gres:gpu:l4:8") || strings.Contains(job, "gres/gpu:l4:8")) || field(job, "Features") != "l4x8" { // 22.05 / 24.11+
			t.Fatalf("job not kept at 8 GPUs: %s", job)
		}
		if !strings.Contains(said, "a cheaper plan fits") {
			t.Errorf("the cheaper plan was not suggested: %q", said)
		}
		waitJob(t, s, id, 3*time.Minute, "COMPLETED")
		out, _ := os.ReadFile(filepath.Join(s.Cluster.Dir(), "work", "slurm-"+id+".out"))
		if !strings.Contains(string(out), "gpus=0,1,2,3,4,5,6,7") {
			t.Errorf("the job did not get 8 GPUs: %q", out)
		}
	})

	t.Run("predicted out of memory is refused at submission", func(t *testing.T) {
		cmd := s.Cluster.UserCommand(ctx, s.Cluster.User(), "sbatch", "--parsable", "--account=demo", "--gres=gpu:1", "--nodes=1", "--comment=burst: params=7B workload=finetune", "--wrap", "true")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "cannot hold this job") || !strings.Contains(string(out), "optimizer 78.2") {
			t.Errorf("want a refusal with the numbers: %v\n%s", err, out)
		}
	})
}
