package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/cloud"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/reconcile"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// TestFaultThrottlingStorm: half of all EC2 calls fail with
// RequestLimitExceeded for 40 s while four jobs start. Every job completes,
// no node gets a second instance for one attempt, and nothing is left
// running.
func TestFaultThrottlingStorm(t *testing.T) {
	s := faultStart(t, 0, stack.Options{})
	s.Emu.InjectFault(ec2emu.Fault{Code: "RequestLimitExceeded", Fraction: 0.5, For: 40 * time.Second})
	var ids []string
	for _, c := range []string{"l4", "l4", "a10g", "a10g"} {
		ids = append(ids, sbatch(t, s, "--gres=gpu:1", "--constraint="+c, "--wrap", "sleep 2"))
	}
	for _, id := range ids {
		waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	}
	throttled := 0
	for _, c := range s.Emu.Calls() {
		if c.Code == "RequestLimitExceeded" {
			throttled++
		}
	}
	if throttled == 0 {
		t.Fatal("the storm throttled no call; the test tested nothing")
	}
	t.Logf("%d of %d EC2 calls throttled", throttled, s.Emu.CallCount(""))
	assertClean(t, s, time.Minute)
}

// TestFaultSpotPoolsDry: no spot capacity in any pool of the l4 class
// (spot-then-on-demand): the job runs on an on-demand instance.
func TestFaultSpotPoolsDry(t *testing.T) {
	s := faultStart(t, 0, stack.Options{})
	for _, typ := range []string{"g6.xlarge", "g6.2xlarge"} {
		for _, z := range []string{"us-east-1a", "us-east-1b"} {
			s.Emu.SetCapacity(typ, z, "spot", 0)
		}
	}
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 1")
	waitJob(t, s, id, 2*time.Minute, "COMPLETED")
	var lifecycles []string
	for _, in := range s.Emu.Instances() {
		lifecycles = append(lifecycles, in.Lifecycle)
	}
	if len(lifecycles) != 1 || lifecycles[0] != "on-demand" {
		t.Fatalf("want one on-demand instance, got %v", lifecycles)
	}
	spotTried := false
	for _, c := range s.Emu.Calls() {
		if c.Action == "CreateFleet" && c.Params.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot" {
			spotTried = true
		}
	}
	if !spotTried {
		t.Error("spot was never tried before falling back")
	}
	assertClean(t, s, time.Minute)
}

// TestFaultSpotOnlyDry: a spot-only class with every spot pool dry: the
// node goes back with the EC2 reason, the job is requeued (pending, not
// failed) and nothing runs; once capacity returns the job runs. The test
// stands in for time on two timers: Slurm's ~120 s requeue delay
// (starttime=now) and the provider's 3-minute memory of dry pools (the
// cache file is removed).
func TestFaultSpotOnlyDry(t *testing.T) {
	s := faultStart(t, 0, stack.Options{Configure: func(c *config.Config) {
		for i := range c.Classes {
			if c.Classes[i].Name == "a10g" {
				c.Classes[i].Capacity = capacity.Spot
			}
		}
	}})
	pools := func(n int) {
		for _, typ := range []string{"g5.xlarge", "g5.2xlarge"} {
			for _, z := range []string{"us-east-1a", "us-east-1b"} {
				s.Emu.SetCapacity(typ, z, "spot", n)
			}
		}
	}
	pools(0)
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 1")
	var node, reason string
	eventually(t, 60*time.Second, "a node handed back with the capacity reason", func() bool {
		for _, n := range []string{"a10g-1", "a10g-2", "a10g-3", "a10g-4"} {
			if r := nodeField(s, n, "Reason"); strings.Contains(r, "burst: InsufficientInstanceCapacity") {
				node, reason = n, r
				return true
			}
		}
		return false
	})
	t.Logf("node %s: Reason=%s", node, reason)
	if !strings.Contains(reason, "spot") {
		t.Errorf("reason %q does not say which capacity was missing", reason)
	}
	eventually(t, 30*time.Second, "job "+id+" pending again", func() bool {
		st, _, err := s.Cluster.JobState(context.Background(), id)
		return err == nil && st == "PENDING"
	})
	if live := liveInstances(s); len(live) != 0 {
		t.Fatalf("%d instances running for a job that got no capacity", len(live))
	}
	for _, in := range s.Emu.Instances() {
		if in.Lifecycle != "spot" {
			t.Fatalf("spot-only class launched %s capacity", in.Lifecycle)
		}
	}
	pools(-1) // capacity returns
	os.Remove(filepath.Join(s.Cfg.Sizer.StateDir, ec2p.UnavailableFile))
	if _, err := s.Cluster.Run(context.Background(), "scontrol", "update", "jobid="+id, "starttime=now"); err != nil {
		t.Fatal(err)
	}
	// up to slurm.resume_timeout (90 s here) more: the first allocation's
	// PrologSlurmctld (burst-resume's wait) does not notice its node was
	// handed back, and Slurm starts the requeued job only after it returns
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	assertClean(t, s, time.Minute)
}

// TestFaultInstanceTerminatedMidJob: a running job's instance is
// terminated behind burst's back (an admin in the console). The sizer's
// reconciler loop sees the node up without an instance, requeues the job
// and hands the node back with "burst: instance <id> gone"; the job then
// runs again on a new instance and completes.
func TestFaultInstanceTerminatedMidJob(t *testing.T) {
	s := faultStart(t, 2*time.Second, stack.Options{})
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 15")
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	in := instanceOfJob(t, s, id, 30*time.Second)
	node := ec2p.NodeOf(in.Tags)
	if _, err := emuEC2(s).TerminateInstances(context.Background(), &ec2.TerminateInstancesInput{InstanceIds: []string{in.ID}}); err != nil {
		t.Fatal(err)
	}
	var comment string
	eventually(t, 30*time.Second, "node "+node+" handed back with a comment naming "+in.ID, func() bool {
		comment = nodeField(s, node, "Comment")
		return strings.Contains(comment, "instance "+in.ID+" gone")
	})
	t.Logf("node %s: Comment=%s", node, comment)
	eventually(t, 30*time.Second, "job "+id+" requeued", func() bool { return restarts(s, id) >= 1 })
	// the reconciler also writes why into the job's AdminComment once the
	// job is pending again; when Slurm requeued it first and it already runs
	// on a new node, the node's Comment above is the record
	if out, _ := s.Cluster.Run(context.Background(), "scontrol", "show", "job", id); !strings.Contains(out, "instance "+in.ID+" gone") {
		t.Logf("job %s has no AdminComment from the reconciler (requeued by Slurm first)", id)
	}
	// when Slurm requeued it first (the node failed), 24.11 and later hold
	// the job for its requeue delay (BeginTime, ~120 s) before it runs
	// again; 22.05 does not
	waitJob(t, s, id, 5*time.Minute, "COMPLETED")
	sizerLog, _ := os.ReadFile(s.Dir + "/sizer.log")
	if !strings.Contains(string(sizerLog), `"reason":"instance-gone"`) {
		t.Errorf("the sizer's log does not record the reconcile action:\n%s", sizerLog)
	}
	metrics := scrape(t, s)
	if !strings.Contains(metrics, `burst_reconcile_actions_total{action="hand-back",reason="instance-gone"} 1`) {
		t.Errorf("the sizer's /metrics does not count the hand-back:\n%s", grepLines(metrics, "burst_reconcile"))
	}
	assertClean(t, s, time.Minute)
}

// TestFaultSizerDownDuringResume: with burst-sizer stopped, resume ranks
// in-process and the job still runs; the launch is journaled for the sizer.
func TestFaultSizerDownDuringResume(t *testing.T) {
	s := faultStart(t, 0, stack.Options{})
	s.StopSizer()
	id := sbatch(t, s, "--gres=gpu:1", "--account=demo", "--wrap", "sleep 1")
	waitJob(t, s, id, 2*time.Minute, "COMPLETED")
	if n := len(s.Emu.Instances()); n != 1 {
		t.Errorf("want 1 instance, got %d", n)
	}
	j, err := os.ReadFile(s.Cfg.Sizer.StateDir + "/instance-events.jsonl")
	if err != nil || !strings.Contains(string(j), `"kind":"launch"`) {
		t.Errorf("launch not journaled while the sizer was down: %v %s", err, j)
	}
	assertClean(t, s, time.Minute)
}

// TestFaultConcurrentResume: Slurm powers two nodes up while two more
// burst-resume processes resume the same nodes at the same moment: each
// node gets exactly one instance, and both come up.
//
// The emulator answers every call after 200 ms, so that the processes
// reach CreateFleet before any of them sees the other's instance.
func TestFaultConcurrentResume(t *testing.T) {
	s := faultStart(t, 0, stack.Options{Emulator: ec2emu.Options{Latency: 200 * time.Millisecond}})
	const nodes = "a10g-[3-4]"
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	if _, err := s.Cluster.Run(context.Background(), "scontrol", "update", "nodename="+nodes, "state=power_up"); err != nil {
		t.Fatal(err)
	}
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := s.Cluster.Command(context.Background(), binDir+"/burst-resume", nodes).CombinedOutput()
			outs[i], errs[i] = string(b), err
		}()
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("burst-resume %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	waitNode(t, s, "a10g-3", 45*time.Second, "idle")
	waitNode(t, s, "a10g-4", 45*time.Second, "idle")
	per := map[string]int{}
	for _, in := range liveInstances(s) {
		per[ec2p.NodeOf(in.Tags)]++
	}
	if per["a10g-3"] != 1 || per["a10g-4"] != 1 || len(s.Emu.Instances()) != 2 {
		t.Fatalf("want one instance per node, got %v (%d launched in all)", per, len(s.Emu.Instances()))
	}
	// a reconciler pass finds nothing to do
	rep, err := reconciler(t, s, 0).RunOnce(context.Background())
	if err != nil || len(rep.Results) != 0 {
		t.Fatalf("reconciler acted on a consistent cluster: %v %+v", err, rep.Results)
	}
	if _, err := s.Cluster.Run(context.Background(), "scontrol", "update", "nodename="+nodes, "state=power_down"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "instances released", func() bool { return len(liveInstances(s)) == 0 })
	assertClean(t, s, time.Minute)
}

// TestFaultResumeKilled: burst-resume is SIGKILLed between its launch and
// telling Slurm anything, for a node Slurm has powered down (so Slurm will
// not clean it up either), and the instance never registers as the node. `burst-sizer reconcile --dry-run` shows the
// orphan and changes nothing; `burst-sizer reconcile` terminates it once it
// is older than the grace period. A job submitted meanwhile still runs.
func TestFaultResumeKilled(t *testing.T) {
	s := faultStart(t, 0, stack.Options{Boot: bootExcept("l4-4"), Emulator: ec2emu.Options{Latency: 300 * time.Millisecond}})
	cmd := s.Cluster.Command(context.Background(), binDir+"/burst-resume", "l4-4")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "CreateFleet answered", func() bool { return len(s.Emu.Instances()) > 0 })
	// killed after the launch, before it could set the node's address or hand it back
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	orphan := s.Emu.Instances()[0]
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 1")

	run := func(args ...string) string {
		// where Slurm runs: the reconciler calls scontrol
		c := s.Cluster.Command(context.Background(), binDir+"/burst-sizer", append([]string{"--config", s.CfgPath, "reconcile"}, args...)...)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("burst-sizer reconcile %v: %v\n%s", args, err, out)
		}
		t.Logf("burst-sizer reconcile %v:\n%s", args, out)
		return string(out)
	}
	if out := run("--grace", "1h"); strings.Contains(out, orphan.ID) {
		t.Fatalf("a young instance was taken for an orphan:\n%s", out)
	}
	time.Sleep(3 * time.Second)
	if out := run("--grace", "2s", "--dry-run"); !strings.Contains(out, "orphan") || !strings.Contains(out, orphan.ID) {
		t.Fatalf("dry run does not show the orphan %s:\n%s", orphan.ID, out)
	}
	if in, _ := s.Emu.Instance(orphan.ID); in.State != "running" && in.State != "pending" {
		t.Fatalf("dry run changed the orphan: %s", in.State)
	}
	run("--grace", "2s")
	eventually(t, 10*time.Second, "orphan terminated", func() bool {
		in, _ := s.Emu.Instance(orphan.ID)
		return in.State == "shutting-down" || in.State == "terminated"
	})
	waitJob(t, s, id, 2*time.Minute, "COMPLETED")
	assertClean(t, s, time.Minute)
}

// TestFaultDuplicateLaunch: a second instance for a node that already runs
// a job (a double launch that slipped past idempotency, e.g. made by hand
// with another token) is terminated by the reconciler, which keeps the
// instance at Slurm's NodeAddr; the node and its job are unharmed.
//
// The duplicate is caught while still pending (grace 1 ms, boot delay 3 s):
// the stack stops a node's namespace by node name when any of its instances
// stops running, so a running duplicate's termination would kill the real
// node in the test (not in EC2).
func TestFaultDuplicateLaunch(t *testing.T) {
	s := faultStart(t, 0, stack.Options{Emulator: ec2emu.Options{BootDelay: 3 * time.Second}})
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 12")
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	first := instanceOfJob(t, s, id, 30*time.Second)
	node := ec2p.NodeOf(first.Tags)
	p := provider(t, s)
	res, err := p.Launch(context.Background(), cloud.LaunchRequest{Cluster: s.Cfg.Cluster.Name, Attempt: 99,
		Nodes:     []cloud.NodeSpec{{Node: node, JobID: 0}},
		Offerings: []cloud.Offering{{InstanceType: first.InstanceType, Zone: first.Zone, Capacity: capacity.OnDemand}}})
	// the provider refuses to launch for a node that has a live instance
	if err != nil || len(res.Reused) != 1 {
		t.Fatalf("provider launched a second instance for %s: %+v %v", node, res, err)
	}
	out, err := emuEC2(s).RunInstances(context.Background(), runInstancesFor(s, first, node))
	if err != nil {
		t.Fatal(err)
	}
	dup := *out.Instances[0].InstanceId
	rep, err := reconciler(t, s, time.Millisecond).RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var terminated []string
	for _, r := range rep.Results {
		if r.Kind == reconcile.Terminate && r.Reason == reconcile.ReasonDuplicate {
			terminated = append(terminated, r.InstanceIDs...)
		}
	}
	if len(terminated) != 1 || terminated[0] != dup {
		t.Fatalf("want the duplicate %s terminated, got %+v", dup, rep.Results)
	}
	waitJob(t, s, id, 2*time.Minute, "COMPLETED")
	if restarts(s, id) != 0 {
		t.Errorf("job %s was requeued; the duplicate's termination should not touch it", id)
	}
	assertClean(t, s, time.Minute)
}

// runInstancesFor is a RunInstances call that makes a second instance for
// node, tagged as burst tags its own (what a buggy or hand-run launch does).
func runInstancesFor(s *stack.Stack, like ec2emu.Instance, node string) *ec2.RunInstancesInput {
	tag := func(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }
	return &ec2.RunInstancesInput{ImageId: aws.String(s.Cfg.Image.AMI), InstanceType: types.InstanceType(like.InstanceType),
		SubnetId: aws.String(like.SubnetID), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance,
			Tags: []types.Tag{tag(ec2p.TagCluster, s.Cfg.Cluster.Name), tag(ec2p.TagNode, node)}}}}
}

// TestFaultSlurmctldRestart: slurmctld restarts while one job runs and
// another job's node is powering up. Both jobs complete, each node got one
// instance per attempt, a reconciler pass after the restart finds nothing
// to hand back, and nothing is left running.
func TestFaultSlurmctldRestart(t *testing.T) {
	s := faultStart(t, 0, stack.Options{Emulator: ec2emu.Options{BootDelay: 4 * time.Second}})
	running := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 20")
	waitJob(t, s, running, 90*time.Second, "RUNNING")
	starting := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2")
	eventually(t, 30*time.Second, "an instance for job "+starting, func() bool {
		for _, in := range s.Emu.Instances() {
			if in.Tags[ec2p.TagJobID] == starting {
				return true
			}
		}
		return false
	})
	restartSlurmctld(t, s)
	rep, err := reconciler(t, s, 30*time.Second).RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.Kind == reconcile.HandBack {
			t.Errorf("reconciler handed back a node after the restart: %s", r.Action)
		}
	}
	waitJob(t, s, running, 2*time.Minute, "COMPLETED")
	waitJob(t, s, starting, 2*time.Minute, "COMPLETED")
	assertClean(t, s, time.Minute)
}

// TestFaultSizerDownDuringReports: burst-sizer stops while a job runs; the
// node's burst-agent keeps sampling into its on-disk buffer and, when the
// sizer is back, delivers what it buffered: the restarted sizer accepts
// records covering the outage.
func TestFaultSizerDownDuringReports(t *testing.T) {
	s := faultStart(t, 0, stack.Options{Configure: func(c *config.Config) {
		c.Agent.ReportInterval = config.D(time.Second)
	}})
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 25")
	waitJob(t, s, id, 90*time.Second, "RUNNING")
	time.Sleep(3 * time.Second)
	s.StopSizer()
	const outage = 8 * time.Second
	time.Sleep(outage)
	if err := s.StartSizer(context.Background()); err != nil {
		t.Fatal(err)
	}
	var accepted float64
	restarted := time.Now()
	// the agent samples once a second: without its buffer the restarted
	// sizer could have at most about one record per second since the
	// restart; with it, the outage's records come on top
	eventually(t, 15*time.Second, "the buffered reports delivered to the restarted sizer", func() bool {
		m := regexp.MustCompile(`burst_sizer_report_records_total\{result="accepted"\} ([0-9.e+]+)`).FindStringSubmatch(scrape(t, s))
		if m == nil {
			return false
		}
		accepted, _ = strconv.ParseFloat(m[1], 64)
		return accepted >= time.Since(restarted).Seconds()+0.75*outage.Seconds()
	})
	t.Logf("the restarted sizer accepted %.0f records, including the %s outage", accepted, outage)
	waitJob(t, s, id, 90*time.Second, "COMPLETED")
	assertClean(t, s, time.Minute)
}
