package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Command returns an exec.Cmd for a Slurm client (name relative to BinDir,
// or an absolute path) with Environ() and Dir()/work as working directory
// (where sbatch puts slurm-N.out). It runs where the cluster's Slurm runs
// (inside a Debian root's namespace), so absolute paths are paths there:
// burst's binaries too (they call the root's scontrol).
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if !filepath.IsAbs(name) {
		name = filepath.Join(c.opts.BinDir, name)
	}
	cmd := c.env.Command(ctx, "", filepath.Join(c.dir, "work"), append([]string{name}, args...)...)
	cmd.Env = c.Environ()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// NodeCommand is Command inside node name's network namespace (argv[0] an
// absolute path), for one-off commands; NodeExec runs daemons.
func (c *Cluster) NodeCommand(ctx context.Context, name string, argv ...string) (*exec.Cmd, error) {
	c.mu.Lock()
	n, ok := c.nodes[name]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("running in node %s: node not started (StartNode first)", name)
	}
	cmd := c.env.Command(ctx, n.Netns(), filepath.Join(c.dir, "work"), argv...)
	cmd.Env = c.Environ()
	cmd.WaitDelay = 5 * time.Second
	return cmd, nil
}

// Slurm is the installation the cluster runs.
func (c *Cluster) Slurm() Slurm { return c.slurm }

// RootEnv is where the cluster's Slurm processes run (see Env).
func (c *Cluster) RootEnv() *Env { return c.env }

// ClientBin is a directory of Slurm clients (scontrol, squeue, sinfo,
// sbatch, scancel, ...) that host-side code runs, e.g. as
// slurm.ScontrolOptions.BinDir: BinDir for the host's Slurm, else wrappers
// that run the root's clients inside the cluster's namespace.
func (c *Cluster) ClientBin() string { return c.client }

// slurmClients are the programs ClientBin wraps (those the root has).
var slurmClients = []string{"sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "scrontab",
	"sdiag", "sinfo", "sprio", "squeue", "sreport", "srun", "sshare", "sstat", "strigger"}

func (c *Cluster) writeClientBin() error {
	if c.slurm.Host() {
		c.client = c.opts.BinDir
		return nil
	}
	c.client = filepath.Join(c.dir, "slurm-bin")
	if err := os.MkdirAll(c.client, 0o755); err != nil {
		return err
	}
	for _, name := range slurmClients {
		prog := filepath.Join(c.opts.BinDir, name)
		if _, err := os.Stat(c.slurm.Path(prog)); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(c.client, name), []byte(c.env.Wrapper(prog, filepath.Join(c.dir, "work"))), 0o755); err != nil {
			return fmt.Errorf("writing client wrapper: %w", err)
		}
	}
	return nil
}

// startProc starts a long-running process of the cluster where its Slurm
// runs (in node namespace netns unless ""), working directory the run dir.
func (c *Cluster) startProc(name, logPath string, env []string, netns string, argv ...string) (*proc, error) {
	return startProc(name, logPath, env, c.dir, c.env.Argv(netns, c.dir, argv...)...)
}

// Run runs a Slurm client and returns its stdout; the error carries the
// command line and stderr.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := c.Command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("running %s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
