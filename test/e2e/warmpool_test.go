package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/warmpool/forecast"
	"github.com/burst-hpc/burst/test/stack"
)

// jobTimes is what scontrol says of a job.
type jobTimes struct {
	Submit, Start time.Time
	Nodes         string
}

func showJob(t *testing.T, s *stack.Stack, id string) jobTimes {
	t.Helper()
	out, err := s.Cluster.Run(context.Background(), "scontrol", "-o", "show", "job", id)
	if err != nil {
		t.Fatalf("scontrol show job %s: %v", id, err)
	}
	var jt jobTimes
	for _, f := range strings.Fields(out) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "SubmitTime":
			jt.Submit, _ = time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
		case "StartTime":
			jt.Start, _ = time.ParseInLocation("2006-01-02T15:04:05", v, time.Local)
		case "NodeList":
			jt.Nodes = v
		}
	}
	if jt.Submit.IsZero() || jt.Start.IsZero() || jt.Nodes == "" || jt.Nodes == "(null)" {
		t.Fatalf("job %s: no submit/start time or node list in %q", id, out)
	}
	return jt
}

// poolInstances are the instances the warm pool launched: powered up with
// no job, so burst-resume tagged no job id.
func poolInstances(s *stack.Stack, class string) []string {
	var ids []string
	for _, in := range s.Emu.Instances() {
		if in.Tags[ec2p.TagClass] == class && (in.Tags[ec2p.TagJobID] == "" || in.Tags[ec2p.TagJobID] == "0") {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

// TestWarmPool, with the forecast on for class a10g (burst.yaml warm:, a
// cap of $20 a day: two g5.xlarge spot nodes at $0.4125/h):
//   - five submissions (held, so that they take no node) prime the
//     forecast; the pool powers up as many warm nodes as the cap allows
//     (the forecast wants three);
//   - a burst of small jobs then starts on those warm nodes: for each, the
//     node it ran on had its instance running before the job was submitted,
//     so no instance was launched or started for it (its wait is Slurm's
//     scheduling, not a boot);
//   - when arrivals stop the forecast decays and the pool releases every
//     warm node;
//   - from the timeline, never more than the cap's nodes were warm for the
//     pool at once (up with no job yet), and what they cost warm stays
//     within the cap (cap x elapsed / 24 h).
func TestWarmPool(t *testing.T) {
	const capUSD = 20.0
	s := start(t, stack.Options{Configure: func(c *config.Config) {
		c.Classes[1].MaxNodes = 6
		c.Classes[1].WarmUSDPerDay = capUSD
		// a fast forecast for a test: each arrival adds ln2/15 s x 5 s =
		// 0.231 nodes per lead time; five make Poisson(1.16), whose
		// 0.95-quantile is 3; it decays to 0 about 70 s after the last one
		c.Warm = config.Warm{Enabled: true, Interval: config.D(2 * time.Second), Quantile: 0.95,
			HalfLife: config.D(15 * time.Second), ProfileWeight: 0, LeadTime: config.D(5 * time.Second)}
	}})
	ctx := context.Background()
	typ, _ := catalog.Default().Lookup("g5.xlarge")
	capNodes := forecast.CapNodes(capUSD, typ.SpotUSD())
	if capNodes != 2 {
		t.Fatalf("the test expects the cap to allow 2 nodes, it allows %d at $%g/h", capNodes, typ.SpotUSD())
	}

	t0 := time.Now()
	var held []string
	for range 5 {
		held = append(held, sbatch(t, s, "--hold", "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 1"))
	}
	eventually(t, 3*time.Minute, fmt.Sprintf("%d warm a10g nodes from the pool", capNodes), func() bool {
		return len(warmPoolNodes(s, "a10g")) >= capNodes
	})
	t.Logf("warm nodes before the burst: %v", warmPoolNodes(s, "a10g"))

	var burst []string
	submitted := time.Now() // before any burst job exists
	for range capNodes {
		burst = append(burst, sbatch(t, s, "--gres=gpu:1", "--constraint=a10g", "--wrap", "sleep 2"))
	}
	jobStart := map[string][]time.Time{} // node -> burst job starts on it
	for _, id := range burst {
		waitJob(t, s, id, 2*time.Minute, "COMPLETED")
		jt := showJob(t, s, id)
		jobStart[jt.Nodes] = append(jobStart[jt.Nodes], jt.Start)
		started, ok := lastStart(s, jt.Nodes, jt.Start)
		if !ok {
			t.Errorf("job %s ran on %s, which has no instance running before its start", id, jt.Nodes)
			continue
		}
		// the instance the job ran on entered running before the job was
		// submitted: nothing was launched (or started) for it
		if !started.Before(submitted) {
			t.Errorf("job %s (submitted after %s, started %s) waited for a launch: %s's instance started %s", id,
				submitted.Format(time.TimeOnly), jt.Start.Format(time.TimeOnly), jt.Nodes, started.Format(time.TimeOnly))
		}
		t.Logf("job %s: submitted after %s, started %s on %s (instance running since %s)", id, submitted.Format(time.TimeOnly),
			jt.Start.Format(time.TimeOnly), jt.Nodes, started.Format(time.TimeOnly))
	}
	for _, id := range held {
		s.Cluster.Run(ctx, "scancel", id)
	}
	// the sizer published each burst job's start as warm (its wait is
	// Slurm's scheduling)
	eventually(t, 30*time.Second, "the warm starts in the sizer's log", func() bool {
		b, _ := os.ReadFile(filepath.Join(s.Dir, "sizer.log"))
		return strings.Count(string(b), `"class":"a10g","start":"warm"`) >= capNodes
	})
	b, _ := os.ReadFile(filepath.Join(s.Dir, "sizer.log"))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"msg":"job started"`) {
			t.Logf("sizer: %s", l[strings.Index(l, `"class"`):])
		}
	}

	// arrivals stop: every warm node is released
	eventually(t, 4*time.Minute, "the warm pool released every a10g node", func() bool {
		for _, in := range liveInstances(s) {
			if in.Tags[ec2p.TagClass] == "a10g" {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(t0)
	ctld, _ := os.ReadFile(s.Cluster.SlurmctldLog())
	// released by the pool (above the forecast once arrivals stopped) or,
	// when a burst job's end came first, by that job's warm-reuse window
	// or at its end (no job waiting: the queued ones are held)
	endedBurst := false
	for _, id := range burst {
		endedBurst = endedBurst || strings.Contains(string(ctld), "reason set to: burst: job "+id+" ended")
	}
	switch {
	case strings.Contains(string(ctld), "reason set to: burst: warm pool above the forecast"):
		t.Logf("the warm pool released nodes above its forecast")
	case strings.Contains(string(ctld), "reason set to: burst: warm-reuse window over"):
		t.Logf("the nodes were released when their warm-reuse window ended (a job end came before the pool's pass)")
	case endedBurst:
		t.Logf("the nodes were released at their burst job's end, no job waiting for them (the job end came before the pool's pass)")
	default:
		t.Errorf("no node was released by the warm pool or a warm-reuse window (no reason in slurmctld's log)")
	}

	// warm intervals of the pool's instances, from the timeline: from
	// running to the first job start on the node, or to the stop
	type iv struct{ from, to time.Time }
	var warmIv []iv
	pool := map[string]bool{}
	for _, id := range poolInstances(s, "a10g") {
		pool[id] = true
	}
	running := map[string]time.Time{} // instance -> running since
	nodeOf := map[string]string{}
	for _, e := range s.Events.Events() {
		id, _, _ := strings.Cut(e.Detail, " ")
		if !pool[id] {
			continue
		}
		switch e.What {
		case "instance running":
			running[id], nodeOf[id] = e.At, e.Subject
		case "instance stopped":
			from, ok := running[id]
			if !ok {
				continue
			}
			to := e.At
			for _, js := range jobStart[nodeOf[id]] {
				if !js.Before(from.Truncate(time.Second)) && js.Before(to) {
					to = js // a job took it: warm until then (second resolution)
					if to.Before(from) {
						to = from
					}
				}
			}
			warmIv = append(warmIv, iv{from, to})
			delete(running, id)
		}
	}
	if len(warmIv) == 0 {
		t.Fatal("no warm interval of the pool's instances in the timeline")
	}
	warmSec, most := 0.0, 0
	for _, a := range warmIv {
		warmSec += a.to.Sub(a.from).Seconds()
		at := 0
		for _, b := range warmIv {
			if !b.from.After(a.from) && b.to.After(a.from) {
				at++
			}
		}
		most = max(most, at)
	}
	usd, allowed := warmSec*typ.SpotUSD()/3600, capUSD*elapsed.Hours()/24
	t.Logf("warm pool: %d warm intervals, at most %d at once, %.0f node-s warm = $%.5f; the cap allows $%.5f in %s",
		len(warmIv), most, warmSec, usd, allowed, elapsed.Round(time.Second))
	if most > capNodes {
		t.Errorf("%d of the pool's nodes were warm at once; the cap allows %d", most, capNodes)
	}
	if usd > allowed {
		t.Errorf("the warm nodes cost $%.5f; the cap of $%g a day allows $%.5f in %s", usd, capUSD, allowed, elapsed)
	}
}

// nodeStates maps node name -> scontrol state (IDLE+CLOUD+POWERING_UP).
func nodeStates(s *stack.Stack) map[string]string {
	out, _ := s.Cluster.Run(context.Background(), "scontrol", "-o", "show", "node")
	st := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		var name, state string
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "NodeName="); ok {
				name = v
			}
			if v, ok := strings.CutPrefix(f, "State="); ok {
				state = v
			}
		}
		if name != "" {
			st[name] = state
		}
	}
	return st
}

// poolNodes are the class's nodes whose live instance the pool launched.
func poolNodes(s *stack.Stack, class string) map[string]bool {
	pool := map[string]bool{}
	for _, in := range liveInstances(s) {
		if in.Tags[ec2p.TagClass] == class && (in.Tags[ec2p.TagJobID] == "" || in.Tags[ec2p.TagJobID] == "0") {
			pool[ec2p.NodeOf(in.Tags)] = true
		}
	}
	return pool
}

// warmPoolNodes are the class's nodes up and idle (IDLE+CLOUD) whose
// instance the pool launched.
func warmPoolNodes(s *stack.Stack, class string) []string {
	pool := poolNodes(s, class)
	var nodes []string
	for name, st := range nodeStates(s) {
		if pool[name] && st == "IDLE+CLOUD" {
			nodes = append(nodes, name)
		}
	}
	sort.Strings(nodes)
	return nodes
}

// lastStart is when the instance that node ran on at `at` entered
// running, from the stack's timeline.
func lastStart(s *stack.Stack, node string, at time.Time) (time.Time, bool) {
	var last time.Time
	ok := false
	for _, e := range s.Events.Events() {
		if e.Subject == node && e.What == "instance running" && !e.At.After(at.Add(time.Second)) {
			last, ok = e.At, true
		}
	}
	return last, ok
}
