package slurm_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// TestJobsTextMatchesJSON: on 22.05 the command line reads jobs by ID from
// plain squeue (squeue --json there prints every job); against the real
// slurmctld the jobs read so must be those 22.05's squeue --json reports,
// field by field, for a mix of jobs, among them names and comments that
// hold separators, newlines and forged records.
func TestJobsTextMatchesJSON(t *testing.T) {
	c := startCluster(t)
	if v := clusterVersion(t, c); v.AtLeast(23, 2) {
		t.Skipf("Slurm %s: squeue --json filters by ID; plain squeue is read on 22.05 only", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	forged := "1|0|1|x|root|(null)|admin|RUNNING|None|gpu-1|gpu-1|burst: approved|0$"
	var ids []uint32
	for _, args := range [][]string{
		{"-J", "train-7b", "--gres=gpu:a10g:2", "--comment", "burst: params=7B ckpt=/fsx/ck", "-C", "a10g", "--mem=500", "-t", "30", "--requeue", "--begin=now+1hour"},
		{"-J", "gpus-per-job", "--gpus=2", "--mem-per-cpu=100", "-n", "2", "--hold", "--no-requeue"},
		{"-J", "sweep", "--array=0-3", "--hold", "--gres=gpu:1"},
		{"-J", "name|with\nnewline " + forged, "--comment", "a\nb|c d=e " + forged, "--hold", "-t", "1-02:03:00", "-o", "/tmp/out-%j.txt"},
		{"-J", "multi", "-N2", "--gres=gpu:a10g:1", "-C", "a10g|a100", "--hold"},
		{"-J", "running", "-w", "gpu-2", "--gres=gpu:a10g:1", "-c", "2"},
	} {
		if !strings.HasPrefix(args[1], "name|") {
			args = append(args, "-o", "/dev/null")
		}
		id, err := c.Sbatch(ctx, append(args, "--wrap", "sleep 600")...)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseUint(strings.TrimSpace(id), 10, 32)
		ids = append(ids, uint32(n))
	}
	if _, err := c.WaitJobState(ctx, strconv.Itoa(int(ids[len(ids)-1])), "CONFIGURING", "RUNNING"); err != nil {
		t.Fatal(err)
	}
	cl := slurm.NewScontrol(slurm.ScontrolOptions{Conf: c.ConfPath(), BinDir: c.ClientBin()})
	got, err := cl.Jobs(ctx, append(ids, 999999)...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Run(ctx, "squeue", "--json")
	if err != nil {
		t.Fatal(err)
	}
	all, err := slurm.ParseJobsJSON([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) || len(all) != len(ids) {
		t.Fatalf("read %d jobs by ID, squeue --json has %d; want %d", len(got), len(all), len(ids))
	}
	for _, want := range all {
		var g *slurm.Job
		for i := range got {
			if got[i].ID == want.ID {
				g = &got[i]
			}
		}
		if g == nil {
			t.Errorf("job %d (%q) not read by ID", want.ID, want.Name)
			continue
		}
		if want.StdErr == "" { // squeue prints stdout's path for an unset --error
			want.StdErr = want.StdOut
		}
		if d := slurm.DiffJobs(*g, want); d != "" {
			t.Errorf("job %d (%q): plain squeue and squeue --json differ: %s", want.ID, want.Name, d)
		}
	}
}
