package simulate

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/sizer/trace"
)

// The hand-worked tests use a two-type catalog with round prices:
// tst.1x (1 GPU, $1.00/h on-demand, 60% spot savings: $0.40/h) and
// tst.8x (8 GPUs, $8.00/h, spot $3.20/h), and a fixed sizer: the job's
// GPUs on tst.1x when it needs 1 GPU, else ceil(GPUs/8) x tst.8x; spot
// first when allowed, the type's spot pool is not to be avoided and the job
// checkpoints (metadata "checkpoint=none" does not), then on-demand.
var (
	t1 = catalog.InstanceType{Name: "tst.1x", Family: "tst", GPUModel: "tst", GPUManufacturer: "nvidia", GPUs: 1, GPUMemoryMiB: 16384, VCPU: 4, MemoryMiB: 16384, OnDemandUSD: 1, Spot: catalog.Spot{SavingsPct: 60, Bucket: catalog.InterruptUnder5}}
	t8 = catalog.InstanceType{Name: "tst.8x", Family: "tst", GPUModel: "tst", GPUManufacturer: "nvidia", GPUs: 8, GPUMemoryMiB: 16384, VCPU: 64, MemoryMiB: 131072, OnDemandUSD: 8, Spot: catalog.Spot{SavingsPct: 60, Bucket: catalog.InterruptUnder5}}
)

func testCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	c, err := catalog.New([]catalog.InstanceType{t1, t8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type fixedSizer struct{ calls []Request }

func (f *fixedSizer) Offerings(r Request) ([]Plan, error) {
	f.calls = append(f.calls, r)
	typ, nodes := t1, 1
	if r.Job.GPUs > 1 {
		typ, nodes = t8, (r.Job.GPUs+7)/8
	}
	od := Plan{Type: typ, Nodes: nodes, USDPerHour: typ.OnDemandUSD}
	if !r.AllowSpot || len(r.AvoidSpot) > 0 && r.AvoidSpot[0] == typ.Name || r.Job.Metadata == "checkpoint=none" {
		return []Plan{od}, nil
	}
	return []Plan{{Type: typ, Spot: true, Nodes: nodes, USDPerHour: typ.SpotUSD()}, od}, nil
}

// injected interrupts the spot launches whose sequence numbers are keys,
// the value after launch.
type injected map[int]time.Duration

func (in injected) NextInterruption(_ *rand.Rand, n NodeInfo) time.Duration {
	if d, ok := in[n.Sequence]; ok {
		return d
	}
	return -1
}
func (injected) String() string { return "injected" }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func job(submitS, durS float64, gpus int) trace.Job {
	return trace.Job{Submit: epoch.Add(time.Duration(submitS * float64(time.Second))), Duration: time.Duration(durS * float64(time.Second)), GPUs: gpus}
}

// handOptions: fixed 120 s boot, 10 min idle timeout, 2 min warm window,
// 30 min checkpoints, no dry pools, no interruptions unless injected, no
// scheduling delay, no warm pool (warmpool_test.go turns it on).
func handOptions(t testing.TB) Options {
	return Options{
		SchedDelay: -1, Warm: WarmOptions{Disabled: true},
		Catalog: testCatalog(t), Sizer: &fixedSizer{}, GPUModel: "tst",
		BootMedian: 120 * time.Second, BootSigma: -1,
		IdleTimeout: 10 * time.Minute, WarmWindow: 2 * time.Minute,
		Checkpoint: 30 * time.Minute, SpotDryProb: -1,
		Interruptions: PoissonRate{PerNodeHour: 0},
	}
}

func run(t *testing.T, o Options, jobs ...trace.Job) map[string]PolicyResult {
	t.Helper()
	res, err := Run(context.Background(), o, jobs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]PolicyResult{}
	for _, p := range res.Policies {
		out[p.Name] = p
	}
	return out
}

type want struct {
	cost, billed, used, idle, lost float64 // USD, GPU-hours
	p50, p95                       float64 // seconds
	launches, interruptions        int
}

func check(t *testing.T, got PolicyResult, w want) {
	t.Helper()
	eq := func(name string, g, w float64) {
		if math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			t.Errorf("%s %s = %.12g, want %.12g", got.Name, name, g, w)
		}
	}
	eq("cost_usd", got.CostUSD, w.cost)
	eq("gpu_hours_billed", got.GPUHoursBilled, w.billed)
	eq("gpu_hours_used", got.GPUHoursUsed, w.used)
	eq("idle_gpu_hours", got.IdleGPUHours, w.idle)
	eq("lost_gpu_hours", got.LostGPUHours, w.lost)
	eq("wait_p50_s", got.WaitP50S, w.p50)
	eq("wait_p95_s", got.WaitP95S, w.p95)
	if got.Launches != w.launches {
		t.Errorf("%s launches = %d, want %d", got.Name, got.Launches, w.launches)
	}
	if got.Interruptions != w.interruptions {
		t.Errorf("%s interruptions = %d, want %d", got.Name, got.Interruptions, w.interruptions)
	}
}

func TestOneJob(t *testing.T) {
	// One 1-GPU job, submitted at 0, runs 1 h.
	r := run(t, handOptions(t), job(0, 3600, 1))
	// static: p95 demand 1 GPU -> one tst.8x, up from 0 to the job's end
	// at 3600 s: $8; 8 GPU-h billed, 1 used, 7 idle; no wait.
	check(t, r[PolicyStatic], want{cost: 8, billed: 8, used: 1, idle: 7, launches: 1})
	// idle-timeout: launch at 0, ready 120, runs to 3720, idle 10 min to
	// 4320: 4320 s at $1/h = $1.20; wait 120 s.
	check(t, r[PolicyIdleTimeout], want{cost: 1.2, billed: 1.2, used: 1, idle: 0.2, p50: 120, p95: 120, launches: 1})
	// burst: spot at $0.40/h, released 2 min after the end: 3840 s.
	check(t, r[PolicyBurst], want{cost: 0.4 * 3840 / 3600, billed: 3840.0 / 3600, used: 1, idle: 240.0 / 3600, p50: 120, p95: 120, launches: 1})
	if s := *r[PolicyBurst].SavingsVsIdleTimeoutPct; math.Abs(s-100*(1.2-0.4*3840/3600)/1.2) > 1e-9 {
		t.Errorf("burst savings vs idle-timeout = %g%%", s)
	}
	if s := *r[PolicyIdleTimeout].SavingsVsStaticPct; math.Abs(s-85) > 1e-9 {
		t.Errorf("idle-timeout savings vs static = %g%%, want 85%%", s)
	}
}

func TestOverlappingJobs(t *testing.T) {
	// A: 0 s, 1 h. B: 1800 s, 1 h (overlaps A). C: 4000 s, 30 min (after A
	// ends at 3720, inside idle-timeout's window, outside burst's).
	r := run(t, handOptions(t), job(0, 3600, 1), job(1800, 3600, 1), job(4000, 1800, 1))
	// idle-timeout: A on n1 (ready 120, ends 3720), B on n2 (launched 1800,
	// ready 1920, ends 5520, released 6120), C reuses idle n1 at 4000 (wait
	// 0), ends 5800, released 6400. Billed 6400 + 4320 = 10720 s.
	check(t, r[PolicyIdleTimeout], want{cost: 10720.0 / 3600, billed: 10720.0 / 3600, used: 2.5, idle: 10720.0/3600 - 2.5, p50: 120, p95: 120, launches: 2})
	// burst: n1 released at 3840, n2 at 5640 (billed 3840), C launches n3 at
	// 4000, ready 4120, ends 5920, released 6040 (2040 s). 9720 s x $0.40.
	check(t, r[PolicyBurst], want{cost: 0.4 * 9720 / 3600, billed: 9720.0 / 3600, used: 2.5, idle: 9720.0/3600 - 2.5, p50: 120, p95: 120, launches: 3})
	// static: peak demand 2 GPUs -> one tst.8x until C ends at 5800.
	check(t, r[PolicyStatic], want{cost: 8 * 5800.0 / 3600, billed: 8 * 5800.0 / 3600, used: 2.5, idle: 8*5800.0/3600 - 2.5, launches: 1})
}

func TestJobInterruptedOnce(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyBurst}
	o.Interruptions = injected{0: 6000 * time.Second} // first spot node reclaimed 6000 s after launch
	sz := &fixedSizer{}
	o.Sizer = sz
	r := run(t, o, job(0, 7200, 1))
	// Launch 0, ready 120, runs; reclaimed at 6000 after 5880 s of work:
	// three 30-min checkpoints saved 5400 s, 480 s lost; the node is billed
	// 6000 s. Requeued at 6000 on a new spot node, ready 6120 (its 120 s
	// boot is lost too), runs the remaining 1800 s to 7920, released 8040
	// (2040 s). Billed 8040 s x $0.40; idle = first boot + warm window.
	check(t, r[PolicyBurst], want{cost: 0.4 * 8040 / 3600, billed: 8040.0 / 3600, used: 2, lost: 600.0 / 3600, idle: 240.0 / 3600, p50: 120, p95: 120, launches: 2, interruptions: 1})
	if len(sz.calls) != 2 || !sz.calls[1].AllowSpot || sz.calls[1].Interruptions != 1 || len(sz.calls[1].AvoidSpot) != 0 {
		t.Errorf("relaunch request %+v; want spot allowed, 1 interruption, nothing avoided", sz.calls[len(sz.calls)-1])
	}
}

func TestAvoidInterruptedPool(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyBurst}
	o.AvoidInterruptedPool = true
	o.Interruptions = injected{0: 6000 * time.Second}
	sz := &fixedSizer{}
	o.Sizer = sz
	r := run(t, o, job(0, 7200, 1))
	// As above, but the relaunch avoids tst.1x's spot pool, so the sizer
	// offers on-demand: the last 2040 s cost $1/h.
	check(t, r[PolicyBurst], want{cost: 0.4*6000/3600 + 2040.0/3600, billed: 8040.0 / 3600, used: 2, lost: 600.0 / 3600, idle: 240.0 / 3600, p50: 120, p95: 120, launches: 2, interruptions: 1})
	if len(sz.calls) != 2 || len(sz.calls[1].AvoidSpot) != 1 || sz.calls[1].AvoidSpot[0] != "tst.1x" {
		t.Errorf("relaunch request %+v; want tst.1x spot avoided", sz.calls[len(sz.calls)-1])
	}
}

func TestCheckpointOnNoticeLosesOnlyTheRelaunch(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyBurst}
	o.CheckpointOnNotice = true
	o.Interruptions = injected{0: 6000 * time.Second}
	r := run(t, o, job(0, 7200, 1))
	// All 5880 s are saved; the relaunch runs 1320 s: 6120..7440, released
	// 7560.
	check(t, r[PolicyBurst], want{cost: 0.4 * 7560 / 3600, billed: 7560.0 / 3600, used: 2, lost: 120.0 / 3600, idle: 240.0 / 3600, p50: 120, p95: 120, launches: 2, interruptions: 1})
}

func TestNoCheckpointLosesTheAttempt(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyBurst}
	o.Checkpoint = -1
	o.Interruptions = injected{0: 3720 * time.Second}
	r := run(t, o, job(0, 7200, 1))
	// 3600 s of work lost at 3720; relaunch at 3720, ready 3840, runs 7200 s
	// to 11040, released 11160 (7440 s).
	check(t, r[PolicyBurst], want{cost: 0.4 * (3720 + 7440) / 3600, billed: (3720 + 7440) / 3600.0, used: 2, lost: 3720.0 / 3600, idle: 240.0 / 3600, p50: 120, p95: 120, launches: 2, interruptions: 1})
}

func TestOnDemandAfterInterruptionsWithoutProgress(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyBurst}
	o.MaxSpotInterruptions = 1
	sz := &fixedSizer{}
	o.Sizer = sz
	o.Interruptions = injected{0: 1000 * time.Second}
	r := run(t, o, job(0, 3600, 1))
	// Reclaimed at 1000 after 880 s, before the first checkpoint: all lost,
	// and one interruption without progress is the limit, so the relaunch
	// may not use spot at all: on-demand from 1000, ready 1120, runs the
	// whole hour to 4720, released 4840 (3840 s at $1).
	check(t, r[PolicyBurst], want{cost: 0.4*1000/3600 + 3840.0/3600, billed: 4840.0 / 3600, used: 1, lost: 1000.0 / 3600, idle: 240.0 / 3600, p50: 120, p95: 120, launches: 2, interruptions: 1})
	if len(sz.calls) != 2 || !sz.calls[0].AllowSpot || sz.calls[1].AllowSpot || sz.calls[1].Interruptions != 1 {
		t.Errorf("sizer calls = %+v, want spot allowed then not, with 1 interruption", sz.calls)
	}
}

func TestDrySpotFallsBackToOnDemand(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyBurst}
	o.SpotDryProb = 1
	r := run(t, o, job(0, 3600, 1))
	check(t, r[PolicyBurst], want{cost: 3840.0 / 3600, billed: 3840.0 / 3600, used: 1, idle: 240.0 / 3600, p50: 120, p95: 120, launches: 1})
	if r[PolicyBurst].DryFallbacks != 1 || r[PolicyBurst].SpotLaunches != 0 {
		t.Errorf("dry fallbacks %d, spot launches %d; want 1, 0", r[PolicyBurst].DryFallbacks, r[PolicyBurst].SpotLaunches)
	}
}

func TestMultiNodeJobWaitsForAllNodesAndShortJobPaysMinimum(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyIdleTimeout}
	o.IdleTimeout = time.Second
	// 16 GPUs -> 2 x tst.8x; 10 s job: nodes live 120 + 10 + 1 = 131 s.
	// A 1-GPU job of 0 s: its node lives 121 s. Neither hits the 60 s
	// minimum; a third with boot 30 s does (30 + 0 + 1 = 31 s -> 60 s).
	r := run(t, o, job(0, 10, 16), job(0, 0, 1))
	check(t, r[PolicyIdleTimeout], want{cost: 2*8*131.0/3600 + 121.0/3600, billed: (16*131.0 + 121) / 3600, used: 160.0 / 3600, idle: (16*131.0 + 121 - 160) / 3600, p50: 120, p95: 120, launches: 3})
	o.BootMedian = 30 * time.Second
	r = run(t, o, job(0, 0, 1))
	check(t, r[PolicyIdleTimeout], want{cost: 60.0 / 3600, billed: 60.0 / 3600, idle: 60.0 / 3600, p50: 30, p95: 30, launches: 1})
}

func TestStaticFIFOWithBackfill(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyStatic}
	o.StaticPercentile = 0.001 // size to the lowest demand: one tst.8x
	// J1: 4 GPUs at 0 for 1 h. J2: 8 GPUs at 10 s, blocked until J1 ends.
	// J3: 2 GPUs at 20 s for 60 s, backfills past J2 at once.
	r := run(t, o, job(0, 3600, 4), job(10, 3600, 8), job(20, 60, 2))
	// J2 starts 3600 (waited 3590), ends 7200: $8 x 2 h.
	check(t, r[PolicyStatic], want{cost: 16, billed: 16, used: (4*3600 + 8*3600 + 2*60) / 3600.0, idle: 16 - (4*3600+8*3600+2*60)/3600.0, p50: 0, p95: 3590, launches: 1})
	if r[PolicyStatic].StaticNodes != 1 || r[PolicyStatic].StaticType != "tst.8x" {
		t.Errorf("static cluster %d x %s, want 1 x tst.8x", r[PolicyStatic].StaticNodes, r[PolicyStatic].StaticType)
	}
}

func TestStaticMultiNodeJob(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyStatic}
	o.StaticPercentile = 0.001
	// The 16-GPU job forces two nodes; the 1-GPU job submitted with it
	// fits beside nothing (both nodes full) and waits the hour.
	r := run(t, o, job(0, 3600, 16), job(0, 60, 1))
	check(t, r[PolicyStatic], want{cost: 2 * 8 * 3660.0 / 3600, billed: 16 * 3660.0 / 3600, used: 16 + 60.0/3600, idle: 16*3660.0/3600 - 16 - 60.0/3600, p50: 0, p95: 3600, launches: 2})
}

func TestDemandPercentile(t *testing.T) {
	jobs := []trace.Job{job(0, 100, 1), job(0, 10, 4)} // 0-10: 5 GPUs, 10-100: 1
	for _, c := range []struct {
		p    float64
		want int
	}{{0.5, 1}, {0.9, 1}, {0.95, 5}, {1, 5}} {
		if got := demandPercentile(jobs, epoch, c.p); got != c.want {
			t.Errorf("demandPercentile(%g) = %d, want %d", c.p, got, c.want)
		}
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ q, want float64 }{{0.5, 5}, {0.95, 10}, {0.1, 1}, {0.11, 2}, {1, 10}} {
		if got := quantile(xs, c.q); got != c.want {
			t.Errorf("quantile(%g) = %g, want %g", c.q, got, c.want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

func TestBadOptions(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{"cheapest"}
	o.SpotDryProb = 2
	o.GPUModel = "nope"
	_, err := Run(context.Background(), o, []trace.Job{job(0, 1, 1)})
	if err == nil {
		t.Fatal("no error for bad options")
	}
	for _, s := range []string{`policy "cheapest"`, "spot dry probability 2", `gpu model "nope"`} {
		if !contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if _, err := Run(context.Background(), handOptions(t), nil); err == nil {
		t.Error("no error for an empty trace")
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub))
}
