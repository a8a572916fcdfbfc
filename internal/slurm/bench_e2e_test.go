package slurm_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest"
	"github.com/burst-hpc/burst/test/harness"
)

// queuedJobs is how many held jobs BenchmarkSlurmPerResumedNode queues
// first (BURST_BENCH_QUEUED overrides it).
const queuedJobs = 10000

// prologPolls is how many polls the prolog wait makes for one node: a 5 s
// boot at its 200 ms poll interval (it checks the job every 5th poll).
const prologPolls = 25

// tally counts Slurm calls, bytes and time.
type tally struct {
	calls, bytes int
	took         time.Duration
}

func (t *tally) add(c slurm.Call) {
	t.calls++
	t.bytes += c.Stdout
	t.took += c.Took
}

// oldClient replays what burst's client ran before it knew Slurm releases:
// squeue --json for any job lookup, sinfo --json for any node lookup, the
// whole cluster each time.
type oldClient struct {
	bin, conf string
	t         *tally
}

func (o oldClient) run(b *testing.B, name string, args ...string) {
	cmd := exec.Command(filepath.Join(o.bin, name), args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+o.conf)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v: %s", name, args, err, errb.String())
	}
	o.t.add(slurm.Call{Stdout: out.Len(), Took: time.Since(t0)})
}

func (o oldClient) jobs(b *testing.B)  { o.run(b, "squeue", "--json") }
func (o oldClient) nodes(b *testing.B) { o.run(b, "sinfo", "--json") }

// queueHeld submits n held jobs, two sbatch at a time.
func queueHeld(b *testing.B, c *harness.Cluster, n int) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	t0 := time.Now()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := c.Run(ctx, "sbatch", "--hold", "-J", "queued", "-o", "/dev/null", "--wrap", "true"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.Logf("queued %d held jobs in %s", n, time.Since(t0).Round(time.Second))
}

// benchPerResumedNode measures the Slurm calls burst makes for one resumed
// node (resume's job lookup, the prolog wait, the release at job end with
// its warm-reuse scan) and for one spot notice (the jobs on the node), the
// old client's way and through each backend, on the same cluster in the
// same run. Each burst hook is its own process, so each detects the
// version (scontrol --version; slurmrestd's ping), counted. Node updates
// and the spot notice's signal and requeue are left out.
func benchPerResumedNode(b *testing.B, c *harness.Cluster, bin, node, release string) {
	ctx := context.Background()
	n := queuedJobs
	if testing.Short() { // make test's smoke run: the smallest size, once
		n = 100
	}
	if v, err := strconv.Atoi(os.Getenv("BURST_BENCH_QUEUED")); err == nil && v >= 0 {
		n = v
	}
	queueHeld(b, c, n)
	out, err := c.Run(ctx, "sbatch", "--parsable", "-w", node, "--gres=gpu:a10g:1", "-o", "/dev/null", "--wrap", "sleep 600")
	if err != nil {
		b.Fatal(err)
	}
	id64, err := strconv.ParseUint(string(bytes.TrimSpace([]byte(out))), 10, 32)
	if err != nil {
		b.Fatalf("sbatch printed %q", out)
	}
	id := uint32(id64)
	b.Cleanup(func() { _, _ = c.Run(ctx, "scancel", strconv.Itoa(int(id))) })
	// resume runs once slurmctld gave the job its node
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		st, _ := c.Run(ctx, "squeue", "-h", "-j", strconv.Itoa(int(id)), "-o", "%T")
		if s := string(bytes.TrimSpace([]byte(st))); s == "CONFIGURING" || s == "RUNNING" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("job %d not given node %s within a minute (state %q)", id, node, st)
		}
	}

	var oldNode, oldPoll, oldSpot tally
	b.Run(release+"/resumed-node/old", func(b *testing.B) {
		for range b.N {
			o := oldClient{bin, c.ConfPath(), &oldNode}
			o.jobs(b) // resume: the job's request
			for i := range prologPolls {
				if i%5 == 4 {
					o.jobs(b) // the prolog's job check
				}
				o.nodes(b)
			}
			o.nodes(b) // release: is the node already going down?
			o.jobs(b)  // release: pending jobs for warm reuse
		}
		report(b, oldNode, b.N, "node", "old", tally{})
	})
	// the prolog wait alone, per 200 ms poll (the job checked every 5th)
	b.Run(release+"/prolog-poll/old", func(b *testing.B) {
		o := oldClient{bin, c.ConfPath(), &oldPoll}
		for range b.N {
			for i := range 5 {
				if i == 4 {
					o.jobs(b)
				}
				o.nodes(b)
			}
		}
		report(b, oldPoll, 5*b.N, "poll", "old", tally{})
	})
	b.Run(release+"/spot-notice/old", func(b *testing.B) {
		for range b.N {
			oldClient{bin, c.ConfPath(), &oldSpot}.jobs(b) // the jobs on the node
		}
		report(b, oldSpot, b.N, "notice", "old", tally{})
	})

	// each backend the way burst uses it; ratios against the old way, and
	// for rest also against cli, all measured in this run
	node1, poll1, spot1 := map[string]tally{}, map[string]tally{}, map[string]tally{}
	for _, backend := range backends {
		var nodeT, pollT, spotT tally
		b.Run(release+"/resumed-node/"+backend, func(b *testing.B) {
			for range b.N {
				process := func() slurm.Client { // each burst hook is its own process
					slurm.ForgetVersion()
					rest.ResetDetection()
					return newBackend(b, c, backend, nodeT.add)
				}
				cl := process() // burst-resume
				if js, err := cl.Jobs(ctx, id); err != nil || len(js) != 1 {
					b.Fatalf("Jobs(%d) = %v, %v", id, js, err)
				}
				cl = process() // burst-resume as PrologSlurmctld
				for i := range prologPolls {
					if i%5 == 4 {
						if _, err := cl.JobStates(ctx, slurm.JobFilter{IDs: []uint32{id}}); err != nil {
							b.Fatal(err)
						}
					}
					if ns, err := cl.Nodes(ctx, node); err != nil || len(ns) != 1 {
						b.Fatalf("Nodes(%s) = %v, %v", node, ns, err)
					}
				}
				cl = process() // burst-suspend as EpilogSlurmctld
				if _, err := cl.Nodes(ctx, node); err != nil {
					b.Fatal(err)
				}
				// warm reuse (lifecycle.waitingJobs): pending jobs' states, then
				// in full only those waiting for resources or priority
				st, err := cl.JobStates(ctx, slurm.JobFilter{States: []string{"PENDING"}})
				if err != nil || len(st) < n {
					b.Fatalf("JobStates(PENDING) = %d jobs, %v", len(st), err)
				}
				var cand []uint32
				for _, s := range st {
					if s.NodeCount <= 1 && (s.Reason == "Resources" || s.Reason == "Priority" || s.Reason == "None") {
						cand = append(cand, s.ID)
					}
				}
				if len(cand) > 0 {
					if _, err := cl.Jobs(ctx, cand[:min(len(cand), 200)]...); err != nil {
						b.Fatal(err)
					}
				}
			}
			report(b, nodeT, b.N, "node", "old", oldNode)
			if backend == "rest" {
				report(b, nodeT, b.N, "node", "cli", node1["cli"])
			}
			node1[backend] = nodeT
		})
		b.Run(release+"/prolog-poll/"+backend, func(b *testing.B) {
			cl := newBackend(b, c, backend, pollT.add)
			if _, err := cl.Nodes(ctx, node); err != nil { // detect first, uncounted
				b.Fatal(err)
			}
			pollT = tally{}
			for range b.N {
				for i := range 5 {
					if i == 4 {
						if _, err := cl.JobStates(ctx, slurm.JobFilter{IDs: []uint32{id}}); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := cl.Nodes(ctx, node); err != nil {
						b.Fatal(err)
					}
				}
			}
			report(b, pollT, 5*b.N, "poll", "old", oldPoll)
			if backend == "rest" {
				report(b, pollT, 5*b.N, "poll", "cli", poll1["cli"])
			}
			poll1[backend] = pollT
		})
		b.Run(release+"/spot-notice/"+backend, func(b *testing.B) {
			cl := newBackend(b, c, backend, spotT.add)
			if _, err := cl.Nodes(ctx, node); err != nil { // the agent is long-lived: detect first, uncounted
				b.Fatal(err)
			}
			spotT = tally{}
			for range b.N {
				// agent/spotwatch.SlurmClient.JobsOnNode
				st, err := cl.JobStates(ctx, slurm.JobFilter{Nodes: []string{node}, States: []string{"RUNNING", "CONFIGURING"}})
				if err != nil || len(st) != 1 || st[0].ID != id {
					b.Fatalf("JobStates(%s) = %+v, %v", node, st, err)
				}
				if _, err := cl.Jobs(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			report(b, spotT, b.N, "notice", "old", oldSpot)
			if backend == "rest" {
				report(b, spotT, b.N, "notice", "cli", spot1["cli"])
			}
			spot1[backend] = spotT
		})
	}
}

// report prints per-unit figures and, given a baseline's tally from the
// same run, the ratios to it (named x_fewer_bytes_vs_<base>, ...).
func report(b *testing.B, t tally, n int, unit, base string, baseline tally) {
	b.ReportMetric(float64(t.calls)/float64(n), "calls/"+unit)
	b.ReportMetric(float64(t.bytes)/float64(n), "bytes/"+unit)
	b.ReportMetric(float64(t.took.Microseconds())/1000/float64(n), "ms/"+unit)
	if baseline.calls > 0 && t.bytes > 0 && t.took > 0 {
		b.ReportMetric(float64(baseline.bytes)/float64(t.bytes), "x_fewer_bytes_vs_"+base)
		b.ReportMetric(float64(baseline.took)/float64(t.took), "x_less_time_vs_"+base)
	}
}

// BenchmarkSlurmPerResumedNode: calls, bytes and time burst spends on Slurm
// per resumed node and per spot notice, against the harness's real
// slurmctld with 10,000 held jobs queued: the old client's way, then each
// backend (the command line, slurmrestd with JWT), in the same run (see
// benchPerResumedNode).
func BenchmarkSlurmPerResumedNode(b *testing.B) {
	c := startCluster(b)
	v := clusterVersion(b, c)
	b.Logf("Slurm %s, %d held jobs queued (100 with -short), %d prolog polls per node", v, queuedJobs, prologPolls)
	benchPerResumedNode(b, c, c.ClientBin(), "gpu-6", fmt.Sprintf("slurm-%d.%02d", v.Major, v.Minor))
}
