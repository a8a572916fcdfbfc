package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// Production failure modes that are EC2's alone (issue 23): the emulator
// injects each; Slurm and burst are real. Each test ends as every fault
// test does: every job completes, suspend and terminate release every
// instance (assertClean, no reconciler pass of its own), no duplicate
// launch, and burst's spend equals the emulator's bill (start's ledger
// check).

// TestFaultPartialFleet: EC2 answers a two-node job's CreateFleet with one
// instance and an InsufficientInstanceCapacity error, all-or-nothing
// (MinTargetCapacity) notwithstanding. burst's defence
// (internal/cloud/ec2/fleet.go) terminates the lone instance at once; the
// job then runs on a whole fleet and completes.
func TestFaultPartialFleet(t *testing.T) {
	s := faultStart(t, 0, stack.Options{})
	if err := s.Emu.ShortFleets(1, 1); err != nil {
		t.Fatal(err)
	}
	id := sbatch(t, s, "-N2", "--gres=gpu:1", "--constraint=l4", "--wrap", "srun hostname")
	waitJob(t, s, id, 3*time.Minute, "COMPLETED")
	if n := s.Emu.ShortFleeted(); n != 1 {
		t.Fatalf("the emulator cut %d fleets short; the test tested nothing", n)
	}
	// the short fleet is the first CreateFleet: its one instance
	var partial []ec2emu.Instance
	tokens := map[string]int{}
	for _, in := range s.Emu.Instances() {
		tokens[in.ClientToken]++
	}
	for _, in := range s.Emu.Instances() {
		if tokens[in.ClientToken] == 1 {
			partial = append(partial, in)
		}
	}
	if len(partial) != 1 {
		t.Fatalf("want one instance from the short fleet, got %d of %d instances (tokens %v)", len(partial), len(s.Emu.Instances()), tokens)
	}
	p := partial[0]
	if p.State != "shutting-down" && p.State != "terminated" {
		t.Errorf("the short fleet's instance %s is %s: the all-or-nothing defence did not terminate it", p.ID, p.State)
	}
	if p.StateReasonCode != "Client.UserInitiatedShutdown" {
		t.Errorf("instance %s ended by %q, want burst's TerminateInstances", p.ID, p.StateReasonCode)
	}
	if log := readFile(s.LogPath()); !strings.Contains(log, `"msg":"partial fleet terminated (all-or-nothing)"`) || !strings.Contains(log, p.ID) {
		t.Errorf("burst's log does not say it undid the partial fleet %s (%s)", p.ID, s.LogPath())
	}
	if restarts(s, id) != 0 {
		t.Logf("job %s was requeued %d times", id, restarts(s, id))
	}
	assertClean(t, s, time.Minute)
}

// TestFaultEC2Latency: for a minute half of all EC2 calls take 3 s more
// (a latency spike, no error) while a single-node and a two-node job
// start and end. Both complete; nothing is launched twice (the SDK's
// timeouts and retries must not duplicate a slow CreateFleet).
func TestFaultEC2Latency(t *testing.T) {
	s := faultStart(t, 0, stack.Options{})
	s.Emu.InjectFault(ec2emu.Fault{Delay: 3 * time.Second, Fraction: 0.5, For: time.Minute})
	one := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2")
	two := sbatch(t, s, "-N2", "--gres=gpu:1", "--constraint=l4", "--wrap", "srun sleep 2")
	waitJob(t, s, one, 4*time.Minute, "COMPLETED")
	waitJob(t, s, two, 4*time.Minute, "COMPLETED")
	delayed := 0
	for _, c := range s.Emu.Calls() {
		if c.Delayed > 0 {
			delayed++
		}
	}
	if delayed == 0 {
		t.Fatal("no call was delayed; the test tested nothing")
	}
	t.Logf("%d of %d EC2 calls delayed 3 s", delayed, s.Emu.CallCount(""))
	assertClean(t, s, 2*time.Minute)
}

// TestFaultEventualConsistency: a new instance is missing from
// DescribeInstances for 6 s after CreateFleet and its tags for 12 s
// (aws-parallelcluster #7265, aws-parallelcluster-node #702), while
// burst-sizer's reconciler runs every 2 s. burst uses CreateFleet's own
// answer, launches nothing twice, the reconciler hands no node back and
// terminates nothing young, and both jobs complete.
func TestFaultEventualConsistency(t *testing.T) {
	s := faultStart(t, 2*time.Second, stack.Options{})
	if err := s.Emu.SetDescribeLag(6*time.Second, 12*time.Second); err != nil {
		t.Fatal(err)
	}
	one := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2")
	two := sbatch(t, s, "-N2", "--gres=gpu:1", "--constraint=l4", "--wrap", "srun sleep 2")
	waitJob(t, s, one, 3*time.Minute, "COMPLETED")
	waitJob(t, s, two, 3*time.Minute, "COMPLETED")
	for _, id := range []string{one, two} {
		if n := restarts(s, id); n != 0 {
			t.Errorf("job %s was requeued %d times: an instance EC2 did not list yet was taken for a missing one", id, n)
		}
	}
	if n := len(s.Emu.Instances()); n != 3 {
		t.Errorf("want 3 instances (one per node), EC2 launched %d", n)
	}
	if log := readFile(s.Dir + "/sizer.log"); strings.Contains(log, `"reason":"instance-gone"`) {
		t.Errorf("the sizer's reconciler handed a node back for an instance EC2 did not list yet")
	}
	assertClean(t, s, time.Minute)
}

// TestFaultSQSDuplicateOutOfOrder: EventBridge delivers every EC2 event to
// the sizer's queue twice, each copy up to 15 s late, so state changes
// arrive duplicated and out of order (a "running" after its
// "terminated"). Jobs complete, every event is consumed, and the spend
// ledger still equals EC2's bill (start's ledger check, after the last
// late copy).
func TestFaultSQSDuplicateOutOfOrder(t *testing.T) {
	s := faultStart(t, 0, stack.Options{EventRule: ec2emu.EventRule{DuplicateFraction: 1, Jitter: 15 * time.Second}})
	a := sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 3")
	b := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 1")
	waitJob(t, s, a, 3*time.Minute, "COMPLETED")
	waitJob(t, s, b, 3*time.Minute, "COMPLETED")
	assertClean(t, s, time.Minute)
	eventually(t, 90*time.Second, "every instance terminated", func() bool { return emuSettled(s) })
	eventually(t, 60*time.Second, "every event delivered twice", func() bool {
		for _, e := range s.Emu.Events() {
			if e.Rule != "" && e.Copies != 2 {
				return false
			}
		}
		return true
	})
	evs := s.Emu.Events()
	reordered := overtaken(evs)
	if reordered == 0 {
		t.Fatal("no copy of an event overtook a copy of an earlier one of its instance; the test tested nothing")
	}
	eventually(t, 60*time.Second, "the sizer consumed every copy", func() bool {
		return metricSum(t, s, "burst_sizer_ec2_events_total") >= float64(2*len(evs))
	})
	t.Logf("%d events, each delivered twice, %d pairs out of order", len(evs), reordered)
}

// overtaken counts the pairs of one instance's events (emitted in order)
// where some copy of the later one is due before some copy of the earlier:
// the sizer then reads, say, "running" after "terminated". Every copy
// counts, not just the last, since each is jittered on its own.
func overtaken(evs []ec2emu.EventRecord) int {
	n := 0
	for i := range evs {
		for j := i + 1; j < len(evs); j++ {
			if evs[i].Event.Detail.InstanceID != evs[j].Event.Detail.InstanceID ||
				len(evs[i].Deliveries) == 0 || len(evs[j].Deliveries) == 0 {
				continue
			}
			if slices.MinFunc(evs[j].Deliveries, time.Time.Compare).Before(slices.MaxFunc(evs[i].Deliveries, time.Time.Compare)) {
				n++
			}
		}
	}
	return n
}

// metricSum adds every sample of a metric family.
func metricSum(t *testing.T, s *stack.Stack, name string) float64 {
	t.Helper()
	total := 0.0
	for _, l := range strings.Split(scrape(t, s), "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			f := strings.Fields(l)
			var v float64
			if _, err := fmt.Sscan(f[len(f)-1], &v); err == nil {
				total += v
			}
		}
	}
	return total
}
