// Package e2e runs burst end to end: real slurmctld/slurmd (the version
// BURST_SLURM selects: 22.05 from the host, 24.11 or 26.05 from a Debian
// root), the real burst binaries as Slurm runs them, the EC2 emulator over
// HTTP through the real aws-sdk-go-v2 client, and nodes booted by burst's
// own bootstrap.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/harness"
	"github.com/burst-hpc/burst/test/stack"
)

var binDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() && flag.Lookup("test.bench").Value.String() == "" {
		// make test-unit: no daemon, whatever BURST_SLURM says (a -short
		// benchmark run, make bench-smoke, still runs them at their
		// smallest size)
		fmt.Fprintln(os.Stderr, "SKIPPING ALL END-TO-END TESTS in -short mode (they run real Slurm daemons)")
		os.Exit(0)
	}
	sl, err := harness.SelectedSlurm()
	if os.Geteuid() != 0 || err != nil {
		msg := "e2e: needs root (run `make test` as root)"
		if err != nil {
			msg = "e2e: " + err.Error()
		}
		// a version asked for by name never skips: its root must build
		if os.Getenv("BURST_REQUIRE_SLURM") == "1" || os.Getenv("BURST_SLURM") != "" {
			fmt.Fprintln(os.Stderr, "FAIL:", msg)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "SKIPPING ALL END-TO-END TESTS:", msg)
		os.Exit(0)
	}
	api, err := stack.SlurmAPIFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: e2e:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "e2e: %s, slurm.api %s\n", sl, api)
	dir, cleanup, err := stack.Binaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// start brings up a stack for one test and stops it when the test ends.
func start(t *testing.T, o stack.Options) *stack.Stack {
	t.Helper()
	return startStacks(t, o)[0]
}

// startStacks brings up one stack per Options for one test and stops them
// when it ends. Several stacks share one EC2 emulator (stack.NewCloud,
// with the first Options' Emulator): one AWS account and region, each
// cluster with its own cluster.name; the test's end checks the ledger
// against the emulator's bill for all of them together.
func startStacks(t *testing.T, opts ...stack.Options) []*stack.Stack {
	t.Helper()
	eo := opts[0].Emulator
	if eo.BootDelay == 0 {
		eo.BootDelay = time.Second
	}
	if eo.ShutdownDelay == 0 {
		eo.ShutdownDelay = time.Second
	}
	var cloud *stack.Cloud
	if len(opts) > 1 {
		cloud = stack.NewCloud(eo)
	}
	var stacks []*stack.Stack
	ledger := true
	t.Cleanup(func() {
		if ledger && len(stacks) == len(opts) {
			ledgerCheck(t, stacks...)
		}
		for i, s := range stacks {
			if t.Failed() {
				dumpLogs(t, s)
			}
			checkBackend(t, s)
			if v := s.ModelViolations(); v != "" && i == 0 { // one emulator
				t.Errorf("the EC2 emulator's responses break AWS's API model (botocore's service-2.json; fix test/ec2emu):\n%s", v)
			}
			checkJobOwners(t, s)
			s.Stop()
		}
		if cloud != nil {
			cloud.Close()
		}
	})
	for _, o := range opts {
		if o.BinDir == "" {
			o.BinDir = binDir
		}
		o.KeepDir = o.KeepDir || os.Getenv("BURST_KEEP") == "1"
		o.Emulator, o.Cloud = eo, cloud
		ledger = ledger && !o.NoLedgerCheck
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		s, err := stack.Start(ctx, o)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s, slurm.api %s (cluster %s, burst cluster.name %s, run dir %s)", s.Cluster.Slurm(), s.Cfg.Slurm.API, s.Cluster.Name(), s.Cfg.Cluster.Name, s.Cluster.Dir())
		stacks = append(stacks, s)
	}
	return stacks
}

func dumpLogs(t *testing.T, s *stack.Stack) {
	nodeLogs, _ := filepath.Glob(filepath.Join(s.Cluster.Dir(), "log", "node-*.out"))
	agentLogs, _ := filepath.Glob(filepath.Join(s.Dir, "run", "*", "agent.log"))
	nodeLogs = append(nodeLogs, agentLogs...)
	for _, f := range append([]string{s.LogPath(), s.Cluster.SlurmctldLog()}, nodeLogs...) {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		t.Logf("---- %s (tail)\n%s", f, strings.Join(lines, "\n"))
	}
}

// jobScript copies a script of this tree to where users keep theirs: the
// cluster's shared work directory (a Debian root's Slurm sees the run dir,
// not the source tree) and returns its path there.
func jobScript(t *testing.T, s *stack.Stack, rel string) string {
	t.Helper()
	src, err := os.ReadFile(rel)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(s.Cluster.Dir(), "work", filepath.Base(rel))
	if err := os.WriteFile(script, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func sbatch(t *testing.T, s *stack.Stack, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := s.Cluster.Sbatch(ctx, args...)
	if err != nil {
		t.Fatalf("sbatch %v: %v", args, err)
	}
	return id
}

func waitJob(t *testing.T, s *stack.Stack, id string, limit time.Duration, states ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	st, err := s.Cluster.WaitJobState(ctx, id, states...)
	if err != nil {
		out, _ := s.Cluster.Run(context.Background(), "scontrol", "show", "job", id)
		t.Fatalf("job %s did not reach %v: %v\n%s", id, states, err, out)
	}
	return st
}

func waitNode(t *testing.T, s *stack.Stack, node string, limit time.Duration, states ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if _, err := s.Cluster.WaitNodeState(ctx, node, states...); err != nil {
		out, _ := s.Cluster.Run(context.Background(), "scontrol", "show", "node", node)
		t.Fatalf("node %s did not reach %v: %v\n%s", node, states, err, out)
	}
}

// eventually polls cond every 200 ms until it is true or limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for time.Now().Before(end) {
		if cond() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", limit, what)
}

// checkJobOwners fails a test one of whose jobs ran as root: jobs are an
// ordinary user's (the cluster's User), as at a site, unless the test is
// about root and says so with SbatchAsRoot. The owners are Slurm's
// (scontrol, the job completion log), not what the test meant.
func checkJobOwners(t *testing.T, s *stack.Stack) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, partial, err := s.Cluster.CheckJobOwners(ctx)
	if err != nil {
		t.Error(err)
	}
	if partial != nil {
		t.Logf("job owners: checked %d jobs; not all sources were readable: %v", n, partial)
	}
}

// checkBackend fails a test whose burst hooks did not talk to Slurm the way
// slurm.api says. Each hook process that talks to Slurm logs how once: the
// command line's "slurm version", slurmrestd's "slurmrestd" (data version).
// With cli no hook may use slurmrestd; with rest a hook that used the
// command line (the fallback for what a release's REST API lacks) must
// have used slurmrestd as well.
func checkBackend(t *testing.T, s *stack.Stack) {
	const jwtHeader = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9" // {"alg":"HS256","typ":"JWT"}
	b, err := os.ReadFile(s.LogPath())
	if err != nil {
		return
	}
	rest := strings.Contains(string(b), `"msg":"slurmrestd"`)
	cli := strings.Contains(string(b), `"msg":"slurm version"`)
	// no log holds a token (every token burst mints starts with this header)
	for _, f := range []string{s.LogPath(), filepath.Join(s.Dir, "sizer.log")} {
		if l, _ := os.ReadFile(f); strings.Contains(string(l), jwtHeader) {
			t.Errorf("%s holds a JWT", f)
		}
	}
	switch {
	case s.Cfg.Slurm.API == "rest" && cli && !rest:
		t.Errorf("slurm.api is rest, but burst's hooks talked to Slurm through the command line only (log %s)", s.LogPath())
	case s.Cfg.Slurm.API != "rest" && rest:
		t.Errorf("slurm.api is %s, but burst's hooks used slurmrestd (log %s)", s.Cfg.Slurm.API, s.LogPath())
	}
}
