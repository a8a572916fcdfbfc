package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/reconcile"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// bootExcept boots every instance except those of the given nodes, which
// stay up in EC2 but never become Slurm nodes (a broken boot, or an
// instance Slurm gave up on).
func bootExcept(nodes ...string) func(context.Context, *stack.Stack, ec2emu.Instance, string) error {
	return func(ctx context.Context, s *stack.Stack, in ec2emu.Instance, node string) error {
		for _, n := range nodes {
			if n == node {
				return nil
			}
		}
		return stack.BootstrapNode(ctx, s, in, node)
	}
}

// faultStart starts a stack for a fault test (nodes boot through
// burst-agent bootstrap, as everywhere); the sizer's own reconciler loop runs every interval (0: once an
// hour, so the test drives passes itself).
func faultStart(t *testing.T, interval time.Duration, o stack.Options) *stack.Stack {
	t.Helper()
	if interval <= 0 {
		interval = time.Hour
	}
	conf := o.Configure
	o.Configure = func(c *config.Config) {
		c.Sizer.ReconcileInterval.Duration = interval
		if conf != nil {
			conf(c)
		}
	}
	return start(t, o)
}

// slurmClient talks to the test cluster's slurmctld.
func slurmClient(s *stack.Stack) *slurm.Scontrol {
	return slurm.NewScontrol(slurm.ScontrolOptions{Conf: s.Cluster.ConfPath(), BinDir: s.Cluster.ClientBin(), Timeout: 20 * time.Second})
}

// burstSlurm is the Slurm client burst's own programs use with this
// stack's burst.yaml (slurm.api), for the reconciler a test runs in-process:
// the command-line fallback runs the cluster's own clients.
func burstSlurm(t *testing.T, s *stack.Stack) slurm.Client {
	t.Helper()
	cli := slurmClient(s)
	if s.Cfg.Slurm.API != "rest" {
		return cli
	}
	r := s.Cfg.Slurm.Rest
	c, err := rest.New(rest.Options{URL: r.URL, User: r.User, JWTKeyFile: r.JWTKeyFile, Fallback: cli, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// emuEC2 is a plain SDK client on the emulator: an admin's or another
// tool's access, behind burst's back.
func emuEC2(s *stack.Stack) *ec2.Client {
	return ec2.New(ec2.Options{Region: s.Cfg.Cluster.Region, BaseEndpoint: aws.String(s.Emu.URL()),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

// provider is burst's EC2 provider on the emulator.
func provider(t *testing.T, s *stack.Stack) *ec2p.Provider {
	t.Helper()
	p, err := ec2p.New(emuEC2(s), ec2p.Options{Cluster: s.Cfg.Cluster.Name, Subnets: s.Cfg.Network.Subnets,
		ImageID: s.Cfg.Image.AMI, SecurityGroupIDs: s.Cfg.Network.SecurityGroups, StateDir: s.Cfg.Sizer.StateDir})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// reconciler is an in-process reconciler on the stack, as burst-sizer
// builds it, with the given grace period.
func reconciler(t *testing.T, s *stack.Stack, grace time.Duration) *reconcile.Reconciler {
	t.Helper()
	r, err := reconcile.New(provider(t, s), burstSlurm(t, s), reconcile.Options{Grace: grace, ResumeTimeout: s.Cfg.Slurm.ResumeTimeout.Duration,
		Owned:  func(n string) bool { _, ok := s.Cfg.ClassOfNode(n); return ok },
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// strays returns live instances whose node Slurm does not have powered up
// (or powering up): the money burners.
func strays(t *testing.T, s *stack.Stack) []string {
	t.Helper()
	nodes, err := slurmClient(s).Nodes(context.Background())
	if err != nil {
		t.Logf("reading nodes: %v", err)
		return []string{"(sinfo failed)"}
	}
	up := map[string]bool{}
	for _, n := range nodes {
		if n.HasFlag("POWERING_UP") || !(n.HasFlag("POWERED_DOWN") || n.HasFlag("POWERING_DOWN")) {
			up[n.Name] = true
		}
	}
	var out []string
	for _, in := range liveInstances(s) {
		node := ec2p.NodeOf(in.Tags)
		if !up[node] {
			out = append(out, fmt.Sprintf("%s (node %q, %s)", in.ID, node, in.State))
		}
	}
	return out
}

// assertClean checks the end state every fault test must reach through
// burst's own release paths: no running instance without a powered-up
// node, and no node launched twice for one job attempt: for every node and
// job, at most RestartCnt+1 instances, and no two instances of a node from
// one launch (client token).
//
// It waits up to limit for Slurm's SuspendProgram (burst-suspend) and
// burst's terminations to finish, and runs no reconciler pass of its own:
// a stray left after limit fails the test, whatever a later reconciler
// pass would mend. (No fault test today needs the reconciler to mend
// what suspend and terminate left: each that did would say so and run
// reconciler passes before this.)
func assertClean(t *testing.T, s *stack.Stack, limit time.Duration) {
	t.Helper()
	var last []string
	t0 := time.Now()
	for {
		if last = strays(t, s); len(last) == 0 {
			break
		}
		if time.Since(t0) > limit {
			t.Errorf("instances running without a powered-up node %s after the test, with no reconciler pass: suspend or terminate left them: %v", limit, last)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	assertNoDoubleLaunch(t, s)
}

func assertNoDoubleLaunch(t *testing.T, s *stack.Stack) {
	t.Helper()
	perJob := map[string][]string{}    // node/job -> instance ids
	perToken := map[string][]string{}  // node/client token -> instance ids
	for _, in := range s.Instances() { // of this stack's cluster
		node := ec2p.NodeOf(in.Tags)
		job := in.Tags[ec2p.TagJobID]
		if job != "" {
			perJob[node+"/"+job] = append(perJob[node+"/"+job], in.ID)
		}
		perToken[node+"/"+in.ClientToken] = append(perToken[node+"/"+in.ClientToken], in.ID)
	}
	for k, ids := range perToken {
		if len(ids) > 1 {
			t.Errorf("node/launch %s got %d instances: %v", k, len(ids), ids)
		}
	}
	for k, ids := range perJob {
		node, job, _ := strings.Cut(k, "/")
		if n := restarts(s, job); len(ids) > n+1 {
			t.Errorf("node %s got %d instances for job %s, which ran %d times: %v", node, len(ids), job, n+1, ids)
		}
	}
}

// restarts is a job's RestartCnt (0 when Slurm forgot it).
func restarts(s *stack.Stack, job string) int {
	out, err := s.Cluster.Run(context.Background(), "scontrol", "show", "job", "-o", job)
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "Restarts="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// instanceOfJob waits for the live instance running job's node.
func instanceOfJob(t *testing.T, s *stack.Stack, job string, limit time.Duration) ec2emu.Instance {
	t.Helper()
	var found ec2emu.Instance
	eventually(t, limit, "a live instance for job "+job, func() bool {
		for _, in := range liveInstances(s) {
			if in.Tags[ec2p.TagJobID] == job && in.State == "running" {
				found = in
				return true
			}
		}
		return false
	})
	return found
}

// nodeField returns a field of scontrol show node (e.g. "Reason").
func nodeField(s *stack.Stack, node, field string) string {
	out, _ := s.Cluster.Run(context.Background(), "scontrol", "show", "node", node)
	i := strings.Index(out, field+"=")
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(out[i+len(field)+1:], "\n", 2)[0])
}

// restartSlurmctld stops slurmctld (scontrol shutdown: it saves its state)
// and starts it again from that state, as systemd would after a crash or
// an upgrade. The new slurmctld is stopped at the end of the test (and by
// the harness, which stops every process with the cluster's SLURM_CONF).
// The old slurmctld stops answering before it has exited (24.11 in a
// Debian root lingers while a ResumeProgram it started still runs): a new
// one started meanwhile exits at once (its port and state are still
// held), so it is started again until one stays up, as systemd's
// Restart=on-failure would.
func restartSlurmctld(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Cluster.Run(ctx, "scontrol", "shutdown", "slurmctld"); err != nil {
		t.Fatalf("stopping slurmctld: %v", err)
	}
	eventually(t, 30*time.Second, "slurmctld down", func() bool {
		out, err := s.Cluster.Run(ctx, "scontrol", "ping")
		return err != nil || !strings.Contains(out, "is UP")
	})
	lf, err := os.OpenFile(filepath.Join(s.Cluster.Dir(), "log", "slurmctld.restart.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	deadline := time.Now().Add(3 * time.Minute)
	for attempt := 1; ; attempt++ {
		cmd := s.Cluster.Command(context.Background(), "/usr/sbin/slurmctld", "-D", "-f", s.Cluster.ConfPath()) // no -c: recover the saved state
		cmd.Stdout, cmd.Stderr = lf, lf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := slurm.StartUnblocked(cmd); err != nil {
			t.Fatalf("starting slurmctld again: %v", err)
		}
		pid := cmd.Process.Pid
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			syscall.Kill(pid, syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				syscall.Kill(pid, syscall.SIGKILL)
				<-done
			}
		})
		for {
			out, err := s.Cluster.Run(ctx, "scontrol", "ping")
			if err == nil && strings.Contains(out, "is UP") {
				s.Events.Add("slurmctld", "restarted", fmt.Sprint("pid ", pid, ", start ", attempt))
				return
			}
			select {
			case <-done:
			case <-time.After(500 * time.Millisecond):
				if time.Now().Before(deadline) {
					continue
				}
				t.Fatalf("slurmctld not up again after %d starts (see %s)", attempt, lf.Name())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slurmctld not up again after %d starts, each exited (see %s)", attempt, lf.Name())
		}
		t.Logf("slurmctld start %d exited at once (the old one still shutting down?); starting it again", attempt)
		time.Sleep(2 * time.Second)
	}
}

// scrape returns burst-sizer's /metrics.
func scrape(t *testing.T, s *stack.Stack) string {
	t.Helper()
	m, err := s.Metrics()
	if err != nil {
		t.Fatalf("scraping the sizer: %v", err)
	}
	return m
}

// grepLines keeps the lines of text that contain sub.
func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
