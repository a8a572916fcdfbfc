package slurm_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/admit"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/rest"
	"github.com/burst-hpc/burst/test/harness"
)

// queuedSizes are the held-job queues BenchmarkSlurmPerResumedNode
// measures, growing one cluster's queue in the same run (the first is the
// baseline of the ratios). BURST_BENCH_QUEUED overrides them
// ("1000,10000,100000": make bench-scale); -short measures 100 only.
var queuedSizes = []int{1000, 10000}

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

// queueHeld submits n held jobs (each its own job, no arrays: an array's
// pending tasks are one record in squeue's view), two sbatch at a time.
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

// benchSizes are the queue lengths to measure: queuedSizes, 100 with
// -short (make test's smoke run), or BURST_BENCH_QUEUED's comma-separated
// list, growing.
func benchSizes(b *testing.B) []int {
	env := os.Getenv("BURST_BENCH_QUEUED")
	if env == "" {
		if testing.Short() {
			return []int{100}
		}
		return queuedSizes
	}
	var sizes []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || len(sizes) > 0 && n < sizes[len(sizes)-1] {
			b.Fatalf("BURST_BENCH_QUEUED=%q: want growing job counts separated by commas, e.g. 1000,10000,100000", env)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) > 5 {
		b.Fatalf("BURST_BENCH_QUEUED=%q: at most 5 sizes (one node each)", env)
	}
	return sizes
}

// benchPerResumedNode measures the Slurm calls burst makes for one resumed
// node (resume's job lookup, the prolog wait, the release at job end with
// its warm-reuse scan), the same with admission control configured
// (admit.View in each hook, resumed-node-admission, and the way it read
// before, every job in each hook, resumed-node-admission-every-job) and
// for one spot notice (the jobs on the node), through each backend, at
// each queue length of benchSizes on the same cluster in the same run (the
// queue grows between them; each size has a job of its own on a node of
// its own), and the old client's way at the first size. Each burst hook is its own process, so each detects the
// version (scontrol --version; slurmrestd's ping), counted. Node updates
// and the spot notice's signal and requeue are left out. Prints one
// slurm-traffic line per figure, with ratios against the first size.
func benchPerResumedNode(b *testing.B, c *harness.Cluster, bin, release, version string) {
	ctx := context.Background()
	type key struct{ backend, what string }
	first := map[key]tally{}
	queued := 0
	for i, n := range benchSizes(b) {
		queueHeld(b, c, n-queued)
		queued = n
		node := fmt.Sprintf("gpu-%d", 6-i)
		id := runningJob(b, c, node)
		if i == 0 {
			benchOld(b, c, bin, release, id)
		}
		ac := benchAdmission(b, id)
		for _, backend := range backends {
			for _, what := range []string{"resumed-node", "resumed-node-admission", "resumed-node-admission-every-job", "spot-notice"} {
				if what == "resumed-node-admission-every-job" && n > everyJobUpTo {
					continue // the old way: 230 MB a resumed node at 10,000 queued
				}
				var t tally
				b.Run(fmt.Sprintf("%s/queued=%d/%s/%s", release, n, what, backend), func(b *testing.B) {
					t = tally{}
					for range b.N {
						switch what {
						case "resumed-node":
							resumedNode(b, c, backend, id, node, nil, false, &t)
						case "resumed-node-admission":
							resumedNode(b, c, backend, id, node, ac, false, &t)
						case "resumed-node-admission-every-job":
							resumedNode(b, c, backend, id, node, ac, true, &t)
						default:
							spotNotice(b, c, backend, id, node, &t)
						}
					}
					t = tally{t.calls / b.N, t.bytes / b.N, t.took / time.Duration(b.N)}
					report(b, t, 1, "op", "", tally{})
				})
				k := key{backend, what}
				if i == 0 {
					first[k] = t
				}
				base := first[k]
				fmt.Printf("slurm-traffic backend=%s version=%s what=%s queued=%d calls=%d bytes=%d seconds=%.3f x_bytes_vs_queued%d=%.2f x_seconds_vs_queued%d=%.2f\n",
					backend, version, what, n, t.calls, t.bytes, t.took.Seconds(),
					benchSizes(b)[0], ratio(t.bytes, base.bytes), benchSizes(b)[0], ratio(int(t.took), int(base.took)))
			}
		}
		_, _ = c.Run(ctx, "scancel", strconv.Itoa(int(id)))
	}
}

// everyJobUpTo is the largest queue the old way of the hooks (every job,
// each hook) is measured at: it grows with the queue (230 MB and 20-40 s a
// resumed node at 10,000 queued), so at 100,000 it would read gigabytes a
// node and take the machine's memory for squeue's JSON.
const everyJobUpTo = 10000

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// runningJob submits a one-GPU job on node and waits for slurmctld to give
// it the node (resume runs then).
func runningJob(b *testing.B, c *harness.Cluster, node string) uint32 {
	ctx := context.Background()
	out, err := c.Run(ctx, "sbatch", "--parsable", "-w", node, "--gres=gpu:a10g:1", "-o", "/dev/null", "--wrap", "sleep 600")
	if err != nil {
		b.Fatal(err)
	}
	id64, err := strconv.ParseUint(strings.TrimSpace(out), 10, 32)
	if err != nil {
		b.Fatalf("sbatch printed %q", out)
	}
	id := uint32(id64)
	b.Cleanup(func() { _, _ = c.Run(ctx, "scancel", strconv.Itoa(int(id))) })
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		st, _ := c.Run(ctx, "squeue", "-h", "-j", strconv.Itoa(int(id)), "-o", "%T")
		if s := strings.TrimSpace(st); s == "CONFIGURING" || s == "RUNNING" {
			return id
		}
		if time.Now().After(deadline) {
			b.Fatalf("job %d not given node %s within 5 minutes (state %q)", id, node, st)
		}
	}
}

// benchOld measures the old client's way (squeue --json for any job
// lookup, sinfo --json for any node lookup) per resumed node, per prolog
// poll and per spot notice, printing the figures.
func benchOld(b *testing.B, c *harness.Cluster, bin, release string, id uint32) {
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
		report(b, oldNode, b.N, "node", "", tally{})
	})
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
		report(b, oldPoll, 5*b.N, "poll", "", tally{})
	})
	b.Run(release+"/spot-notice/old", func(b *testing.B) {
		for range b.N {
			oldClient{bin, c.ConfPath(), &oldSpot}.jobs(b) // the jobs on the node
		}
		report(b, oldSpot, b.N, "notice", "", tally{})
	})
}

// benchAdmission is admission control as compose wires it for the
// cluster's nodes (gpu-[1-6], big-1), a GPU limit on the benchmark's
// account, and an admissions file in which the running job is admitted.
func benchAdmission(b *testing.B, id uint32) *admit.Controller {
	dir := b.TempDir()
	doc := fmt.Sprintf(`{"version":1,"entries":[{"job_id":%d,"account":"root","user":"root","gpus":1,"nodes":1,"state":"admitted","at":%q}]}`,
		id, time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(dir, admit.FileName), []byte(doc), 0o600); err != nil {
		b.Fatal(err)
	}
	nodes := []string{"big-1"}
	for i := 1; i <= 6; i++ {
		nodes = append(nodes, fmt.Sprintf("gpu-%d", i))
	}
	return admit.New(admit.Options{Dir: dir, Limits: []admit.Limit{{Account: "root", MaxGPUs: 64}}, Nodes: nodes,
		Owned: func(n string) bool { return strings.HasPrefix(n, "gpu-") || n == "big-1" }})
}

// resumedNode makes the calls of one resumed node through backend, each
// hook its own process: burst-resume's job lookup, the prolog wait
// (prologPolls node polls, the job checked every 5th), burst-suspend as
// EpilogSlurmctld (the node, then lifecycle.waitingJobs' warm-reuse scan).
// With admission control (ac), burst-resume, the prolog and the epilog each
// read admission's view (admit.View; the epilog's with the held entries'
// jobs), or every job with everyJob (what they read before).
func resumedNode(b *testing.B, c *harness.Cluster, backend string, id uint32, node string, ac *admit.Controller, everyJob bool, t *tally) {
	ctx := context.Background()
	process := func() slurm.Client { // each burst hook is its own process
		slurm.ForgetVersion()
		return newBackendDetecting(b, c, backend, t.add, &rest.Detections{})
	}
	view := func(cl slurm.Client, withHeld bool) {
		var js []slurm.Job
		var err error
		if everyJob {
			js, err = cl.Jobs(ctx)
		} else {
			js, err = ac.View(ctx, cl, withHeld, id)
		}
		if err != nil || !slices.ContainsFunc(js, func(j slurm.Job) bool { return j.ID == id }) {
			b.Fatalf("admission's view (every job: %v) = %d jobs without job %d, %v", everyJob, len(js), id, err)
		}
		if !everyJob {
			var in []string
			for _, j := range js {
				in = append(in, fmt.Sprintf("%d:%s", j.ID, j.State))
			}
			b.Logf("admission's view (with held entries: %v): %s", withHeld, strings.Join(in, " "))
		}
	}
	cl := process() // burst-resume
	if ac != nil {
		view(cl, false)
	} else if js, err := cl.Jobs(ctx, id); err != nil || len(js) != 1 {
		b.Fatalf("Jobs(%d) = %v, %v", id, js, err)
	}
	cl = process() // burst-resume as PrologSlurmctld
	if ac != nil {
		view(cl, false)
	}
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
	if ac != nil {
		view(cl, true)
	}
	if _, err := cl.Nodes(ctx, node); err != nil {
		b.Fatal(err)
	}
	// warm reuse (lifecycle.waitingJobs): the states of the 1,000
	// highest-priority pending jobs, then in full only those waiting for
	// resources or priority (at most 200)
	st, err := cl.JobStates(ctx, slurm.JobFilter{States: []string{"PENDING"}, Max: 1000})
	if err != nil {
		b.Fatalf("JobStates(PENDING, Max 1000): %v", err)
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

// spotNotice makes the calls of one spot notice through backend (the
// agent is long-lived: it detected the version before, uncounted):
// agent/spotwatch's jobs on the node, then the job in full.
func spotNotice(b *testing.B, c *harness.Cluster, backend string, id uint32, node string, t *tally) {
	ctx := context.Background()
	var skip bool
	cl := newBackend(b, c, backend, func(call slurm.Call) {
		if !skip {
			t.add(call)
		}
	})
	skip = true
	if _, err := cl.Nodes(ctx, node); err != nil {
		b.Fatal(err)
	}
	skip = false
	st, err := cl.JobStates(ctx, slurm.JobFilter{Nodes: []string{node}, States: []string{"RUNNING", "CONFIGURING"}})
	if err != nil || len(st) != 1 || st[0].ID != id {
		b.Fatalf("JobStates(%s) = %+v, %v", node, st, err)
	}
	if _, err := cl.Jobs(ctx, id); err != nil {
		b.Fatal(err)
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
// slurmctld with 1,000 and 10,000 held jobs queued (make bench-scale: up to
// 100,000): the old client's way, then each backend (the command line,
// slurmrestd with JWT and the command-line fallback), in the same run (see
// benchPerResumedNode).
func BenchmarkSlurmPerResumedNode(b *testing.B) {
	c := startCluster(b)
	v := clusterVersion(b, c)
	b.Logf("Slurm %s, held jobs queued: %v, %d prolog polls per node", v, benchSizes(b), prologPolls)
	ver := fmt.Sprintf("%d.%02d", v.Major, v.Minor)
	benchPerResumedNode(b, c, c.ClientBin(), "slurm-"+ver, ver)
}
