package simulate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/burst-hpc/burst/sizer/trace"
)

// warmOptions: handOptions with the warm pool on: q 0.95, half-life
// 30 min, recent rate only, 2 min lead time (the fixed boot), re-planned
// every minute, a cap far above what the tests keep.
func warmOptions(t testing.TB) Options {
	o := handOptions(t)
	o.Policies = []string{PolicyBurst}
	o.Warm = WarmOptions{Quantile: 0.95, HalfLife: 30 * time.Minute, ProfileWeight: -1, CapUSDPerDay: 1000, Interval: time.Minute}
	return o
}

// TestWarmPoolHandWorked follows the forecast by hand (internal/warmpool/forecast's
// equations; rates in nodes per hour, tau = 30 min / ln 2, mean = rate x
// 2 min, target = smallest s with P(Poisson(mean) <= s) >= 0.95, i.e. 0
// while mean <= -ln 0.95 = 0.05129).
//
//   - A and B (1 GPU, 600 s) at 0: after A r = 2 ln2 = 1.386 (mean 0.046,
//     target 0); after B r = 2.773 (mean 0.092, P(0) = 0.912: target 1): the
//     pool launches #1 at 0, up at 120. A and B launch their own nodes
//     (cold, wait 120).
//   - C (1 GPU, 600 s) at 300 finds #1 idle: a warm start, wait 0. r =
//     2.773 x 2^(-1/6) + 1.386 = 3.856 (mean 0.129, target 1): #1 is taken,
//     so #2 is launched at 300, up at 420.
//   - A and B end at 720, C at 900: the class has #2 warm and the target is
//     still 1 (r = 3.280 and 3.061), so their nodes wait out the 2 min reuse
//     window: released at 840, 840 and 1020 (#1 ran C).
//   - The forecast decays: at the 2640 s tick r = 1.566 (P(0) = 0.9491,
//     target 1), at 2700 r = 1.530 (P(0) = 0.9503, target 0): #2 (idle
//     since 420) is released at 2700.
//   - D (1 GPU, 100 s) at 20000: nothing warm; cold, wait 120, ends 20220,
//     released 20340. It is the last job, so the pool drains.
//
// Billed: 840 + 840 + 1020 + 2400 + 340 = 5440 s of spot at $0.40/h. The
// pool held #1 for 300 s (boot and idle) and #2 for 2400 s: 2700 s.
func TestWarmPoolHandWorked(t *testing.T) {
	r := run(t, warmOptions(t), job(0, 600, 1), job(0, 600, 1), job(300, 600, 1), job(20000, 100, 1))
	b := r[PolicyBurst]
	check(t, b, want{cost: 0.4 * 5440 / 3600, billed: 5440.0 / 3600, used: (3*600 + 100) / 3600.0, idle: (5440.0 - 1900) / 3600, p50: 120, p95: 120, launches: 5})
	if b.WarmStarts != 1 || b.AheadStarts != 0 || b.ColdStarts != 3 || b.PoolLaunches != 2 {
		t.Errorf("warm %d ahead %d cold %d pool launches %d; want 1, 0, 3, 2", b.WarmStarts, b.AheadStarts, b.ColdStarts, b.PoolLaunches)
	}
	if math.Abs(b.PoolNodeHours-2700.0/3600) > 1e-9 || math.Abs(b.PoolCostUSD-0.4*2700/3600) > 1e-9 {
		t.Errorf("pool %g node-h $%g; want %g node-h $%g", b.PoolNodeHours, b.PoolCostUSD, 2700.0/3600, 0.4*2700/3600)
	}
	// the first wait is a boot, C's is scheduling only
	o := warmOptions(t)
	o.SchedDelay = 2 * time.Second
	r = run(t, o, job(0, 600, 1), job(0, 600, 1), job(300, 600, 1), job(20000, 100, 1))
	if b := r[PolicyBurst]; b.WarmStarts != 1 || b.WaitP50S != 122 {
		t.Errorf("with a 2 s scheduling delay: warm starts %d, p50 %g; want 1, 122 (boot + scheduling)", b.WarmStarts, b.WaitP50S)
	}
}

// TestWarmPoolTakesABootingNode: a job that arrives while the pool's node
// is still booting takes it and waits only the rest of its boot.
func TestWarmPoolTakesABootingNode(t *testing.T) {
	// As above, but C arrives at 60: #1 (launched at 0) is up at 120, so C
	// waits 60 s.
	r := run(t, warmOptions(t), job(0, 600, 1), job(0, 600, 1), job(60, 600, 1), job(20000, 100, 1))
	b := r[PolicyBurst]
	if b.AheadStarts != 1 || b.WarmStarts != 0 || b.ColdStarts != 3 {
		t.Errorf("warm %d ahead %d cold %d; want 0, 1, 3", b.WarmStarts, b.AheadStarts, b.ColdStarts)
	}
	if b.WaitP50S != 120 || b.WaitMeanS != (120+120+60+120)/4.0 {
		t.Errorf("waits p50 %g mean %g; want 120 and %g", b.WaitP50S, b.WaitMeanS, (120+120+60+120)/4.0)
	}
}

// TestWarmPoolCap: a cap below one node-day keeps nothing warm ($0.40/h x
// 24 h = $9.60 per node-day); at $9.60 one node.
func TestWarmPoolCap(t *testing.T) {
	o := warmOptions(t)
	o.Warm.CapUSDPerDay = 9.59
	jobs := []trace.Job{job(0, 600, 1), job(0, 600, 1), job(300, 600, 1), job(20000, 100, 1)}
	r := run(t, o, jobs...)
	if b := r[PolicyBurst]; b.PoolLaunches != 0 || b.WarmStarts != 0 || b.PoolCostUSD != 0 {
		t.Errorf("under the cap: pool launches %d, warm starts %d, pool $%g; want none", b.PoolLaunches, b.WarmStarts, b.PoolCostUSD)
	}
	o.Warm.CapUSDPerDay = 9.6
	if b := run(t, o, jobs...)[PolicyBurst]; b.PoolLaunches != 2 || b.WarmStarts != 1 {
		t.Errorf("a one-node cap: pool launches %d, warm starts %d; want 2, 1", b.PoolLaunches, b.WarmStarts)
	}
	o.Warm.Disabled = true
	if b := run(t, o, jobs...)[PolicyBurst]; b.PoolLaunches != 0 || b.WarmStarts != 0 || b.Launches != 4 {
		t.Errorf("pool off: pool launches %d, warm starts %d, launches %d; want 0, 0, 4", b.PoolLaunches, b.WarmStarts, b.Launches)
	}
}

// TestWarmPoolOnDemandJobSkipsSpotNodes: a job that may not use spot
// (checkpoint=none) does not take the pool's spot node.
func TestWarmPoolOnDemandJobSkipsSpotNodes(t *testing.T) {
	c := job(300, 600, 1)
	c.Metadata = "checkpoint=none"
	r := run(t, warmOptions(t), job(0, 600, 1), job(0, 600, 1), c, job(20000, 100, 1))
	if b := r[PolicyBurst]; b.WarmStarts != 0 || b.ColdStarts != 4 {
		t.Errorf("warm %d cold %d; want the on-demand job cold (0, 4)", b.WarmStarts, b.ColdStarts)
	}
}

// TestWarmPoolSpendWithinCap: on a random bursty workload the pool's
// spend never exceeds the cap x days (its node count never exceeds the
// cap's nodes at any moment), and each job's wait is either a boot or a
// warm start's scheduling delay.
func TestWarmPoolSpendWithinCap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var jobs []trace.Job
	at := 0.0
	for range 2000 {
		at += rng.ExpFloat64() * 120
		n := 1 + rng.IntN(4)
		for range n { // bursts of up to 4 at once
			jobs = append(jobs, job(at, 60+rng.ExpFloat64()*900, 1))
		}
	}
	for _, capUSD := range []float64{9.6, 20, 50} {
		o := warmOptions(t)
		o.Warm.CapUSDPerDay = capUSD
		o.SchedDelay = 3 * time.Second
		res, err := Run(t.Context(), o, jobs)
		if err != nil {
			t.Fatal(err)
		}
		b := res.Policies[0]
		days := res.SpanHours / 24
		if b.PoolCostUSD > capUSD*math.Ceil(days)+1e-9 || b.PoolCostUSD > capUSD*days*(1+1e-9)+capUSD {
			t.Errorf("cap $%g/day over %.2f days: pool spent $%g", capUSD, days, b.PoolCostUSD)
		}
		// at most floor(cap / 9.60) nodes at any moment: node-hours <= that x span
		maxNodes := math.Floor(capUSD / 9.6)
		if b.PoolNodeHours > maxNodes*res.SpanHours+1e-9 {
			t.Errorf("cap $%g/day: %g pool node-hours over %g h, more than %g nodes at once", capUSD, b.PoolNodeHours, res.SpanHours, maxNodes)
		}
		if b.WarmStarts == 0 {
			t.Errorf("cap $%g/day: no warm starts on a bursty workload", capUSD)
		}
		if b.WarmStarts+b.AheadStarts+b.ColdStarts != len(jobs) {
			t.Errorf("%d+%d+%d starts classified, %d jobs", b.WarmStarts, b.AheadStarts, b.ColdStarts, len(jobs))
		}
	}
}

// TestWarmPoolMissFeedback works the miss feedback by hand (forecast's
// equations; each first start weighs a = (1 - 0.95) / 10 = 0.005 in the
// miss rate m, and once m > 0.05 the quantile kept is 1 - 0.0025 / m; the
// target is 1 when the mean of one 2-minute boot exceeds -ln q).
//
//   - Jobs 1-12 come alone, 10 hours apart: each finds r = 2 ln 2 = 1.386
//     nodes/h (mean 0.0462, below -ln 0.95 = 0.0513 and, after 11 misses,
//     below -ln 0.953398 = 0.0477): target 0, all cold. Job 12's miss
//     makes m = 1 - 0.995^12 = 0.058378, quantile 0.957175, threshold
//     0.043769, below its mean: the pool launches a node, which nobody
//     takes (the mean falls below the threshold 2.3 minutes later; it is
//     released after 2 idle minutes). With a fixed 0.95 nothing is
//     launched.
//   - Job 13 comes 2 h after job 12: r = 1.386 (1 + 2^-4) = 1.4729 (mean
//     0.049096). It launches its own node (its 13th miss: m = 0.063086,
//     quantile 0.960371, threshold 0.040435): the feedback's target is 1
//     and the pool launches a node, up 2 min later; it stays while the
//     mean is above 0.040435, for 8.4 minutes. With a fixed 0.95 the
//     target stays 0.
//   - Job 14, 3 minutes after job 13, takes that node: a warm start. With
//     the quantile fixed it launches (cold, 120 s). It is the last
//     submission: the pool drains and launches no replacement.
func TestWarmPoolMissFeedback(t *testing.T) {
	var jobs []trace.Job
	for i := range 12 {
		jobs = append(jobs, job(float64(i)*36000, 600, 1))
	}
	t13 := 11*36000.0 + 7200
	jobs = append(jobs, job(t13, 600, 1), job(t13+180, 600, 1))
	o := warmOptions(t)
	b := run(t, o, jobs...)[PolicyBurst]
	if b.WarmStarts != 1 || b.ColdStarts != 13 || b.PoolLaunches != 2 {
		t.Errorf("with the feedback: warm %d cold %d pool launches %d; want 1, 13, 2", b.WarmStarts, b.ColdStarts, b.PoolLaunches)
	}
	o.Warm.FixedQuantile = true
	b = run(t, o, jobs...)[PolicyBurst]
	if b.WarmStarts != 0 || b.ColdStarts != 14 || b.PoolLaunches != 0 {
		t.Errorf("quantile fixed: warm %d cold %d pool launches %d; want 0, 14, 0", b.WarmStarts, b.ColdStarts, b.PoolLaunches)
	}
}
