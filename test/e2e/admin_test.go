package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/stack"
)

// repoRoot is the module's root directory (README.md, Makefile).
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// adminSteps returns the commands of one ```sh block of the README's admin
// set-up, step 2 ("Slurm."): the block whose first command starts with
// first ("make install": from source; "make package": from the package),
// comments and blank lines dropped. The tests run exactly these, so a
// README that drifts from what works fails here.
func adminSteps(t *testing.T, first string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## Admin set-up")
	j := strings.Index(readme[max(i, 0):], "2. **Slurm.**")
	if i < 0 || j < 0 {
		t.Fatal(`README.md has no "## Admin set-up" section with a step "2. **Slurm.**"`)
	}
	rest := readme[i+j:]
	if e := strings.Index(rest, "3. **"); e >= 0 {
		rest = rest[:e]
	}
	var blocks []string
	for {
		k := strings.Index(rest, "```sh\n")
		if k < 0 {
			break
		}
		block := rest[k+len("```sh\n"):]
		end := strings.Index(block, "```")
		if end < 0 {
			t.Fatal("README.md: admin step 2 has an unterminated ```sh block")
		}
		rest = block[end+3:]
		var out []string
		for _, l := range strings.Split(block[:end], "\n") {
			if c := strings.Index(l, "  #"); c >= 0 {
				l = l[:c]
			}
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
		blocks = append(blocks, strings.Join(out, "\n"))
		if len(out) > 0 && strings.HasPrefix(out[0], first) {
			if last := out[len(out)-1]; last != "systemctl restart slurmctld" {
				t.Fatalf("README admin step 2's %q block should end with `systemctl restart slurmctld` (the harness starts slurmctld there); it ends with %q", first, last)
			}
			return out
		}
	}
	t.Fatalf("README admin step 2 has no ```sh block starting with %q; its blocks:\n%s", first, strings.Join(blocks, "\n---\n"))
	return nil
}

// runAdminSteps runs the middle of a README block (after the install,
// before the restart) where the cluster's Slurm runs, as on the head node,
// with /etc/slurm replaced by the run's conf directory; bin is where
// burst-slurm-conf is ("": found on PATH, as after a package install).
// It returns each command with its output.
func runAdminSteps(s *stack.Stack, c *harness.Cluster, confDir, bin string, steps []string) ([]string, error) {
	var ran []string
	for _, step := range steps {
		cmd := strings.NewReplacer("/etc/slurm/", confDir+"/", "/etc/slurm ", confDir+" ").Replace(step + " ")
		cmd = strings.TrimSpace(cmd)
		switch {
		case strings.HasPrefix(cmd, "burst-slurm-conf "):
			if bin != "" {
				cmd = filepath.Join(bin, cmd)
			}
		case strings.HasPrefix(cmd, "echo "):
		default:
			return ran, fmt.Errorf("README admin step 2 has a command the admin tests cannot run: %q (teach the test)", step)
		}
		ec := c.Command(context.Background(), "/bin/bash", "-ec", cmd)
		ec.Env = append(ec.Env, "BURST_CONFIG="+s.CfgPath)
		var out bytes.Buffer
		ec.Stdout, ec.Stderr = &out, &out
		if err := ec.Run(); err != nil {
			return ran, fmt.Errorf("README admin step %q (run as %q): %v\n%s", step, cmd, err, out.String())
		}
		ran = append(ran, fmt.Sprintf("$ %s\n%s", cmd, out.String()))
	}
	return ran, nil
}

// checkAdminSetup checks what both admin tests promise once slurmctld
// runs from the admin's directory: the files burst-slurm-conf wrote, its
// check passing, the example's cloud nodes powered down with their GPUs,
// and a GPU job through the generated cli_filter.lua on a cloud node.
func checkAdminSetup(t *testing.T, s *stack.Stack, ran []string) {
	t.Helper()
	for _, r := range ran {
		t.Log(r)
	}
	confDir := filepath.Dir(s.Cluster.ConfPath())
	for _, f := range []string{"burst.conf", "gres.conf", "cli_filter.lua"} {
		if _, err := os.Stat(filepath.Join(confDir, f)); err != nil {
			t.Errorf("burst-slurm-conf --out did not write %s: %v", f, err)
		}
	}
	gres, _ := os.ReadFile(filepath.Join(confDir, "gres.conf"))
	t.Logf("gres.conf:\n%s", gres)
	if !strings.Contains(strings.Join(ran, "\n"), "slurm.conf has everything burst needs") {
		t.Errorf("burst-slurm-conf check did not pass:\n%s", strings.Join(ran, "\n"))
	}
	nodes, err := s.Cluster.Run(context.Background(), "sinfo", "-h", "-N", "-o", "%N %T %G")
	if err != nil || !strings.Contains(nodes, "l4-1 idle~ gpu:l4:1") || !strings.Contains(nodes, "h100x8-4 idle~ gpu:h100:8") {
		t.Fatalf("sinfo does not list the example's cloud nodes powered down with their GPUs (err %v):\n%s", err, nodes)
	}
	id := sbatch(t, s, "--gres=gpu:1", "--comment=burst: params=1B workload=finetune", "--wrap",
		"echo node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES")
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	out, err := os.ReadFile(filepath.Join(s.Cluster.Dir(), "work", "slurm-"+id+".out"))
	if err != nil || !strings.Contains(string(out), "gpus=0") {
		t.Fatalf("job output %q (err %v): want it to have run with its GPU", out, err)
	}
	all := s.Emu.Instances()
	if len(all) != 1 || !strings.Contains(string(out), "node="+all[0].Tags["burst:node"]) {
		t.Fatalf("job output %q; instances %+v: want one instance, the node the job ran on", out, all)
	}
	t.Logf("job %s ran on %s (instance %s %s %s)", id, all[0].Tags["burst:node"], all[0].ID, all[0].InstanceType, all[0].Lifecycle)
	eventually(t, time.Minute, "the instance terminated after the job", func() bool { return len(liveInstances(s)) == 0 })
}

// exampleBase is examples/burst.yaml, the admin's starting point.
func exampleBase(t *testing.T) []byte {
	t.Helper()
	example, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "burst.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return example
}

// scratchDir is a temporary directory that jobs' users can reach (they
// run burst-agent as the TaskProlog; t.TempDir is 0700).
func scratchDir(t *testing.T) string {
	t.Helper()
	scratch := t.TempDir()
	for _, d := range []string{filepath.Dir(scratch), scratch} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return scratch
}

// TestAdminSetup follows the README's admin set-up literally on the
// selected Slurm: `make install` into a scratch PREFIX, burst.yaml from
// examples/burst.yaml (pointed at this machine: controller, EC2 emulator,
// local FSx directory, fake GPU devices), then step 2's commands as the
// README prints them (paths /etc/slurm and /usr/local replaced by the
// run's): burst-slurm-conf --out into slurm.conf's directory, the Include
// line appended to a plain slurm.conf, burst-slurm-conf check, slurmctld
// started from that directory. A GPU job (through the generated
// cli_filter.lua) then runs on a cloud node booted by burst. The only
// departures, both because several runs share this machine: burst.yaml is
// not at /etc/burst, so Slurm's hooks find it through the stack's
// wrappers; and the sizer daemon (step 5) is not started (resume ranks
// in-process, as documented when it is down).
func TestAdminSetup(t *testing.T) {
	steps := adminSteps(t, "make install")
	scratch := scratchDir(t)
	prefix := filepath.Join(scratch, "prefix")
	// make install, as the README says, into the scratch prefix (and its
	// own build directory: the versions' runs go side by side)
	mk := exec.Command("/bin/bash", "-c", steps[0]+" PREFIX="+prefix+" BIN="+filepath.Join(scratch, "build"))
	mk.Dir = repoRoot(t)
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", steps[0], err, out)
	}
	bin := filepath.Join(prefix, "bin")
	for _, b := range []string{"burst-resume", "burst-suspend", "burst-sizer", "burst-agent", "burst-slurm-conf"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("make install did not install %s: %v", b, err)
		}
	}
	var ran []string
	o := stack.Options{BinDir: bin, BaseYAML: exampleBase(t), BaseName: "examples/burst.yaml", NoSizer: true,
		Configure: func(c *config.Config) {
			c.Warm.Enabled = false // the sizer daemon, which runs the warm pool, is not started here
		},
		AdminSetup: func(s *stack.Stack, c *harness.Cluster, confDir string) (err error) {
			ran, err = runAdminSteps(s, c, confDir, bin, steps[1:len(steps)-1])
			return err
		}}
	s := start(t, o)
	checkAdminSetup(t, s, ran)
}
