package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/stack"
)

// TestAdminSetupFromPackage follows the README's package block literally:
// `make package` (into a scratch build and dist directory), then
// `apt-get install` of the .deb inside the cluster's Debian root (a
// private overlay over the cached root: a clean Debian per run), then the
// same burst-slurm-conf steps, now the packaged /usr/bin/burst-slurm-conf.
// Slurm's hooks and the nodes' bootstrap run the packaged programs from
// /usr/bin; a GPU job then runs on a cloud node. It needs a Debian root:
// on the host's Slurm 22.05 (the host is no clean machine to install
// into) TestAdminSetup's source install is the admin test.
func TestAdminSetupFromPackage(t *testing.T) {
	sl, err := harness.SelectedSlurm()
	if err != nil {
		t.Fatal(err)
	}
	if sl.Host() {
		t.Skipf("SKIP: the package install runs in a clean Debian root (BURST_SLURM=24.11 or 26.05); Slurm %s is the host's, which is no clean machine to install into (TestAdminSetup covers the source install here)", sl.Release)
	}
	steps := adminSteps(t, "make package")
	if len(steps) < 3 || !strings.HasPrefix(steps[1], "apt-get install") {
		t.Fatalf("README admin step 2's package block should be `make package`, `apt-get install ...`, then the set-up; its commands: %q", steps)
	}
	scratch := scratchDir(t)
	build, dist := filepath.Join(scratch, "build"), filepath.Join(scratch, "dist")
	mk := exec.Command("/bin/bash", "-c", steps[0]+" BIN="+build+" DIST="+dist)
	mk.Dir = repoRoot(t)
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", steps[0], err, out)
	}
	var ran []string
	o := stack.Options{BinDir: build, HookBin: "/usr/bin", BaseYAML: exampleBase(t), BaseName: "examples/burst.yaml", NoSizer: true,
		Configure: func(c *config.Config) {
			c.Warm.Enabled = false // the sizer daemon, which runs the warm pool, is not started here
		},
		AdminSetup: func(s *stack.Stack, c *harness.Cluster, confDir string) error {
			// the package, where the root sees it: the stack's directory
			if err := os.MkdirAll(filepath.Join(s.Dir, "dist"), 0o755); err != nil {
				return err
			}
			debs, _ := filepath.Glob(filepath.Join(dist, "burst_*_amd64.deb"))
			if len(debs) != 1 {
				return fmt.Errorf("make package made %q in %s: want one burst_*_amd64.deb", debs, dist)
			}
			b, err := os.ReadFile(debs[0])
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(s.Dir, "dist", filepath.Base(debs[0])), b, 0o644); err != nil {
				return err
			}
			// the install, as printed, from the directory holding dist/
			in := c.Command(context.Background(), "/bin/bash", "-ec", "cd "+s.Dir+" && "+steps[1])
			in.Env = append(in.Env, "DEBIAN_FRONTEND=noninteractive", "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
			out, err := in.CombinedOutput()
			ran = append(ran, "$ "+steps[1]+"\n"+string(out))
			if err != nil {
				return fmt.Errorf("README admin step %q in the Debian root: %w\n%s", steps[1], err, out)
			}
			more, err := runAdminSteps(s, c, confDir, "", steps[2:len(steps)-1])
			ran = append(ran, more...)
			return err
		}}
	s := start(t, o)
	// the package is installed where Slurm runs, and its programs answer
	for _, q := range [][]string{{"dpkg-query", "-W", "-f", "${Status} ${Version}", "burst"}, {"/usr/bin/burst-resume", "--version"}, {"stat", "-c", "%U:%G %a", "/var/lib/burst"}} {
		out, err := s.Cluster.Run(context.Background(), q[0], q[1:]...)
		if err != nil {
			t.Fatalf("%s in the Debian root: %v\n%s", strings.Join(q, " "), err, out)
		}
		ran = append(ran, "$ "+strings.Join(q, " ")+"\n"+out)
	}
	if st := ran[len(ran)-3]; !strings.Contains(st, "install ok installed") {
		t.Fatalf("dpkg says the burst package is not installed:\n%s", st)
	}
	if v := ran[len(ran)-2]; !strings.Contains(v, "\nburst-resume ") {
		t.Fatalf("the packaged burst-resume does not print its version on standard output:\n%s", v)
	}
	checkAdminSetup(t, s, ran)
}
