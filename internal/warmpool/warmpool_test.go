package warmpool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// fake is the shared stateful Slurm fake, with the node updates asked for
// since the last look.
type fake struct {
	*slurmfake.Slurm
	seen int
}

func newFake(jobs []slurm.Job, nodes []slurm.Node) *fake {
	return &fake{Slurm: slurmfake.New(jobs, nodes)}
}

// take returns "NAMES STATE REASON" for each update since the last take.
func (f *fake) take() []string {
	ups := f.Updates()
	var out []string
	for _, u := range ups[f.seen:] {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s", strings.Join(u.Names, ","), u.State, u.Reason)))
	}
	f.seen = len(ups)
	return out
}

func node(name, state string, flags ...string) slurm.Node {
	return slurm.Node{Name: name, State: state, Flags: append([]string{"CLOUD"}, flags...)}
}

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC) // a Monday

func testConfig() *config.Config {
	c := config.Default()
	c.Classes = []config.Class{
		{Name: "a10", GPUModel: "a10g", GPUsPerNode: 1, MaxNodes: 4, WarmUSDPerDay: 100},
		{Name: "a100", GPUModel: "a100", GPUsPerNode: 8, MaxNodes: 2},
	}
	c.Slurm.Partitions = []config.Partition{{Name: "gpu", Default: true}}
	c.Warm = config.Warm{Enabled: true, Interval: config.D(time.Minute), Quantile: 0.95, HalfLife: config.D(30 * time.Minute),
		ProfileWeight: 0, LeadTime: config.D(2 * time.Minute)}
	return c
}

func jobs(n int, first uint32, constraint string, at time.Time) []slurm.Job {
	var js []slurm.Job
	for i := range n {
		js = append(js, slurm.Job{ID: first + uint32(i), State: "PENDING", Features: constraint, NodeCount: 1, SubmitTime: at})
	}
	return js
}

func downNodes(class string, n int) []slurm.Node {
	var ns []slurm.Node
	for i := 1; i <= n; i++ {
		ns = append(ns, node(fmt.Sprintf("%s-%d", class, i), "IDLE", "POWERED_DOWN"))
	}
	return ns
}

func newPool(t *testing.T, sl *fake, now *time.Time, price float64) *Pool {
	t.Helper()
	p, err := New(Options{Config: testConfig(), Slurm: sl, Now: func() time.Time { return *now },
		Price: func(context.Context, *config.Class) (float64, error) { return price, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPoolFollowsTheForecast works the forecast by hand (internal/warmpool/forecast):
// 20 jobs for a10 at t0, half-life 30 min: r = 20 x 2 ln2 = 27.73 nodes/h;
// mean over a 2-minute boot 0.924; the 0.95-quantile of Poisson(0.924) is
// 3 (P(<=2) = 0.933, P(<=3) = 0.986). The cap ($100/day at $0.50/h) allows
// 8.
func TestPoolFollowsTheForecast(t *testing.T) {
	now := t0
	sl := newFake(jobs(20, 100, "a10", t0), append(downNodes("a10", 4), downNodes("a100", 2)...))
	p := newPool(t, sl, &now, 0.5)
	plans, err := p.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].Class != "a10" || plans[0].Plan.Target != 3 || plans[0].Plan.CapNodes != 8 {
		t.Fatalf("plans %+v", plans)
	}
	if got := sl.take(); len(got) != 1 || got[0] != "a10-[1-3] POWER_UP" {
		t.Fatalf("updates %q, want a10-[1-3] POWER_UP", got)
	}
	// Slurm has not yet started the power-up (the nodes still show
	// POWERED_DOWN): they are the pool's, booting, and nothing is powered
	// up twice
	now = t0.Add(2 * time.Second)
	if plans, _ := p.Tick(context.Background()); len(sl.take()) != 0 || len(plans[0].Booting) != 3 {
		t.Fatalf("before Slurm starts the power-up: plan %+v", plans[0])
	}
	// booting: nothing more to do; the same jobs are not counted twice
	now = t0.Add(time.Minute)
	sl.SetNodes(node("a10-1", "IDLE", "POWERING_UP"), node("a10-2", "IDLE", "POWERING_UP"), node("a10-3", "IDLE", "POWERING_UP"), node("a10-4", "IDLE", "POWERED_DOWN"))
	plans, _ = p.Tick(context.Background())
	if got := sl.take(); len(got) != 0 || len(plans[0].Booting) != 3 {
		t.Fatalf("while booting: updates %q, plan %+v", got, plans[0])
	}
	if r := plans[0].Plan.RatePerHour; math.Abs(r-20*2*math.Ln2*math.Pow(2, -1.0/30)) > 1e-9 {
		t.Errorf("rate %g after a minute: the jobs were counted again or decayed wrong", r)
	}
	// up and idle: still 3
	now = t0.Add(3 * time.Minute)
	sl.SetNodes(node("a10-1", "IDLE"), node("a10-2", "IDLE"), node("a10-3", "IDLE"), node("a10-4", "IDLE", "POWERED_DOWN"))
	if _, err := p.Tick(context.Background()); err != nil || len(sl.take()) != 0 {
		t.Fatalf("warm at target: err %v", err)
	}
	// a job took a10-1: the pool replaces it at once (launch ahead)
	now = t0.Add(4 * time.Minute)
	sl.SetNodes(node("a10-1", "ALLOCATED"), node("a10-2", "IDLE"), node("a10-3", "IDLE"), node("a10-4", "IDLE", "POWERED_DOWN"))
	if _, err := p.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sl.take(); len(got) != 1 || got[0] != "a10-4 POWER_UP" {
		t.Fatalf("after a job took a warm node: %q, want a10-4 POWER_UP", got)
	}
	// 2 h later, no new jobs: r = 27.73 / 16 = 1.733: mean 0.0578, P(0) =
	// 0.944 < 0.95 -> target 1: of the three warm nodes the two idle longest
	// go (a10-4 was first seen idle only now)
	now = t0.Add(2 * time.Hour)
	sl.SetNodes(node("a10-1", "ALLOCATED"), node("a10-2", "IDLE"), node("a10-3", "IDLE"), node("a10-4", "IDLE"))
	plans, _ = p.Tick(context.Background())
	if plans[0].Plan.Target != 1 {
		t.Fatalf("target after 2 h %d, want 1", plans[0].Plan.Target)
	}
	if got := sl.take(); len(got) != 1 || got[0] != "a10-[2-3] POWER_DOWN_ASAP "+ReleaseReason {
		t.Fatalf("release: %q", got)
	}
	// 3 h: r = 0.866, mean 0.0289, P(0) = 0.972: target 0; a10-4 goes
	now = t0.Add(3 * time.Hour)
	sl.SetNodes(node("a10-1", "ALLOCATED"), node("a10-2", "IDLE", "POWERED_DOWN"), node("a10-3", "IDLE", "POWERED_DOWN"), node("a10-4", "IDLE"))
	p.Tick(context.Background())
	if got := sl.take(); len(got) != 1 || !strings.HasPrefix(got[0], "a10-4 POWER_DOWN_ASAP") {
		t.Fatalf("release at target 0: %q", got)
	}
}

func TestPoolCapAndMatching(t *testing.T) {
	now := t0
	// a100 jobs never count for a10 ("a10" is not a substring match of
	// "a100"), and a10's cap at $1/h of $48/day allows two nodes
	sl := newFake(append(jobs(20, 1, "a100", t0), jobs(20, 100, "a10", t0)...), downNodes("a10", 4))
	price := 1.0
	p, err := New(Options{Config: testConfig(), Slurm: sl, Now: func() time.Time { return now },
		Price: func(context.Context, *config.Class) (float64, error) { return price, nil }})
	if err != nil {
		t.Fatal(err)
	}
	p.o.Config.Classes[0].WarmUSDPerDay = 48
	plans, err := p.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pl := plans[0].Plan
	if pl.Want != 3 || pl.CapNodes != 2 || pl.Target != 2 || !pl.Capped || math.Abs(pl.RatePerHour-20*2*math.Ln2) > 1e-9 {
		t.Fatalf("plan %+v; want 20 a10 jobs only, want 3 capped to 2", pl)
	}
	if got := sl.take(); len(got) != 1 || got[0] != "a10-[1-2] POWER_UP" {
		t.Fatalf("updates %q", got)
	}
	// the cap is hard: the price doubles, the cap allows one node, and one
	// of the pool's two goes at once (a10-3, idle but not the pool's, is
	// left to burst-suspend)
	now = t0.Add(time.Minute)
	price = 2
	sl.SetNodes(node("a10-1", "IDLE"), node("a10-2", "IDLE"), node("a10-3", "IDLE"), node("a10-4", "IDLE", "POWERED_DOWN"))
	plans, _ = p.Tick(context.Background())
	if got := sl.take(); len(got) != 1 || !strings.HasPrefix(got[0], "a10-1 POWER_DOWN_ASAP") {
		t.Fatalf("above the cap: %q (plan %+v)", got, plans[0])
	}
	if len(plans[0].Lingering) != 1 || plans[0].Lingering[0] != "a10-3" {
		t.Errorf("lingering %v, want a10-3", plans[0].Lingering)
	}
}

// TestPoolOwnsOnlyWhatItPoweredUp: a node a job took stops being the
// pool's; idle nodes the pool did not power up count towards the target but
// are never released by it.
func TestPoolOwnsOnlyWhatItPoweredUp(t *testing.T) {
	now := t0
	sl := newFake(jobs(20, 100, "a10", t0), downNodes("a10", 4))
	p := newPool(t, sl, &now, 0.5)
	p.Tick(context.Background()) // powers up a10-[1-3]
	sl.take()
	// a job took a10-1 and ended; a10-4 finished a job the pool never had
	now = t0.Add(time.Minute)
	sl.SetNodes(node("a10-1", "ALLOCATED"), node("a10-2", "IDLE"), node("a10-3", "IDLE"), node("a10-4", "IDLE"))
	plans, _ := p.Tick(context.Background())
	if got := sl.take(); len(got) != 0 {
		t.Fatalf("three warm (two the pool's, one lingering) at target 3: %q", got)
	}
	if len(plans[0].Taken) != 1 || plans[0].Taken[0] != "a10-1" || len(plans[0].Lingering) != 1 {
		t.Errorf("plan %+v", plans[0])
	}
	// hours later the forecast is 0: the pool releases its two, not a10-1
	// (idle again after its job, seen idle only now) nor a10-4 (idle, not
	// the pool's, seen since t0+1m)
	now = t0.Add(4 * time.Hour)
	sl.SetNodes(node("a10-1", "IDLE"), node("a10-2", "IDLE"), node("a10-3", "IDLE"), node("a10-4", "IDLE"))
	plans, _ = p.Tick(context.Background())
	// a10-4 has been idle and nobody's for hours (longer than the reuse
	// window and two passes): the pool adopts and releases it too
	if got := sl.take(); len(got) != 1 || !strings.HasPrefix(got[0], "a10-[2-4] POWER_DOWN_ASAP") {
		t.Fatalf("release: %q, want a10-[2-4] (a10-1 only just idle)", got)
	}
	if len(plans[0].Adopted) != 1 || plans[0].Adopted[0] != "a10-4" {
		t.Errorf("adopted %v, want a10-4", plans[0].Adopted)
	}
}

func TestPoolNodeStates(t *testing.T) {
	for _, c := range []struct {
		n    slurm.Node
		want nodeKind
	}{
		{node("a10-1", "IDLE"), kindWarm},
		{node("a10-1", "IDLE", "POWERED_DOWN"), kindDown},
		{node("a10-1", "IDLE", "POWERING_UP"), kindBooting},
		{node("a10-1", "IDLE", "POWERED_DOWN", "POWERING_UP"), kindBooting},
		{node("a10-1", "IDLE", "POWERED_DOWN", "POWER_UP"), kindBooting},
		{node("a10-1", "ALLOCATED", "POWERING_UP"), kindOther},
		{node("a10-1", "MIXED"), kindOther},
		{node("a10-1", "IDLE", "DRAIN"), kindOther},
		{node("a10-1", "IDLE", "POWERED_DOWN", "DRAIN"), kindOther},
		{node("a10-1", "IDLE", "POWER_DOWN"), kindOther},
		{node("a10-1", "IDLE", "POWERING_DOWN"), kindOther},
		{node("a10-1", "IDLE", "COMPLETING"), kindOther},
		{node("a10-1", "DOWN", "POWERED_DOWN"), kindOther},
		{node("a10-1", "IDLE", "NOT_RESPONDING"), kindOther},
		{node("a10-1", "IDLE", "NOT_RESPONDING", "POWERING_UP"), kindBooting},
	} {
		if got := kind(c.n); got != c.want {
			t.Errorf("kind(%s) = %d, want %d", c.n.StateString(), got, c.want)
		}
	}
}

func TestPoolWithoutPriceKeepsNothing(t *testing.T) {
	now := t0
	sl := newFake(jobs(20, 100, "a10", t0), downNodes("a10", 4))
	p, err := New(Options{Config: testConfig(), Slurm: sl, Now: func() time.Time { return now },
		Price: func(context.Context, *config.Class) (float64, error) { return 0, errors.New("no offering") }})
	if err != nil {
		t.Fatal(err)
	}
	plans, err := p.Tick(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no offering") || plans[0].Plan.Target != 0 || len(sl.take()) != 0 {
		t.Fatalf("err %v, plans %+v", err, plans)
	}
	sl.JobsErr = errors.New("slurmctld down")
	if _, err := p.Tick(context.Background()); err == nil || !strings.Contains(err.Error(), "slurmctld down") {
		t.Fatalf("Slurm error: %v", err)
	}
}

func TestPoolStateFile(t *testing.T) {
	now := t0
	file := filepath.Join(t.TempDir(), "warm-forecast.json")
	sl := newFake(jobs(20, 100, "a10", t0), downNodes("a10", 4))
	mk := func() *Pool {
		p, err := New(Options{Config: testConfig(), Slurm: sl, StateFile: file, Now: func() time.Time { return now },
			Price: func(context.Context, *config.Class) (float64, error) { return 0.5, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := mk()
	pa, err := a.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// a restarted pool has the same forecast and does not count the same
	// jobs twice
	now = t0.Add(time.Minute)
	b := mk()
	pb, err := b.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := pa[0].Plan.RatePerHour * math.Pow(2, -1.0/30)
	if math.Abs(pb[0].Plan.RatePerHour-want) > 1e-9 {
		t.Errorf("restarted rate %g, want %g", pb[0].Plan.RatePerHour, want)
	}
}

func TestPoolReportsStarts(t *testing.T) {
	now := t0
	sl := newFake(nil, []slurm.Node{node("a10-1", "IDLE", "POWERED_DOWN"), node("a10-2", "IDLE")})
	type start struct {
		class string
		warm  bool
		wait  time.Duration
	}
	var got []start
	p, err := New(Options{Config: testConfig(), Slurm: sl, Now: func() time.Time { return now },
		Price:   func(context.Context, *config.Class) (float64, error) { return 0.5, nil },
		Started: func(c string, w bool, d time.Duration) { got = append(got, start{c, w, d}) }})
	if err != nil {
		t.Fatal(err)
	}
	p.Tick(context.Background()) // a10-2 up and idle, a10-1 down
	now = t0.Add(time.Minute)
	p.Tick(context.Background()) // still so at t0+1m
	sl.SetJobs(
		slurm.Job{ID: 1, State: "COMPLETED", Nodes: "a10-2", Features: "a10", SubmitTime: t0.Add(50 * time.Second), StartTime: t0.Add(61 * time.Second)},
		slurm.Job{ID: 2, State: "RUNNING", Nodes: "a10-1", Features: "a10", SubmitTime: t0.Add(10 * time.Second), StartTime: t0.Add(140 * time.Second)},
		slurm.Job{ID: 3, State: "PENDING", Features: "a10", SubmitTime: t0})
	sl.SetNodes(node("a10-1", "ALLOCATED"), node("a10-2", "IDLE"))
	now = t0.Add(150 * time.Second)
	p.Tick(context.Background())
	p.Tick(context.Background()) // seen once only
	// job 1: a10-2 was seen idle at t0+1m, after its submission (t0+50s)
	// and before its start; job 2: a10-1 was never up and idle
	want := []start{{"a10", true, 11 * time.Second}, {"a10", false, 130 * time.Second}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("starts %+v, want %+v", got, want)
	}
	// the forecast's miss feedback heard the same starts: a warm one, then
	// a cold one, each weighing (1 - 0.95) / 10 = 0.005: 0.005 x 1
	if m := p.Plans()[0].Plan.MissRate; math.Abs(m-0.005) > 1e-12 {
		t.Errorf("miss rate after a warm and a cold start %g, want 0.005", m)
	}
	// where Slurm gives slurmd's start time it decides: a3's slurmd started
	// in job 4's submission second (warm), a4's 20 s after job 5's (cold)
	got = nil
	a3, a4 := node("a10-3", "ALLOCATED"), node("a10-4", "ALLOCATED")
	a3.SlurmdStart, a4.SlurmdStart = t0.Add(100*time.Second), t0.Add(120*time.Second)
	sl.SetNodes(a3, a4)
	sl.SetJobs(slurm.Job{ID: 4, State: "RUNNING", Nodes: "a10-3", SubmitTime: t0.Add(100 * time.Second), StartTime: t0.Add(101 * time.Second)},
		slurm.Job{ID: 5, State: "RUNNING", Nodes: "a10-4", SubmitTime: t0.Add(100 * time.Second), StartTime: t0.Add(121 * time.Second)})
	p.Tick(context.Background())
	if want := []start{{"a10", true, time.Second}, {"a10", false, 21 * time.Second}}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("starts by slurmd start %+v, want %+v", got, want)
	}
	// warm: 0.005 x 0.995 = 0.004975; cold: 0.004975 + 0.005 x 0.995025 = 0.009950125
	if m := p.Plans()[0].Plan.MissRate; math.Abs(m-0.009950125) > 1e-12 {
		t.Errorf("miss rate after four starts %g, want 0.009950125", m)
	}
}

// A sizer that no longer leads (Fence fails) powers nothing up; once it
// leads again the same pass acts.
func TestPoolFenced(t *testing.T) {
	now := t0
	sl := newFake(jobs(20, 100, "a10", t0), downNodes("a10", 4))
	deposed := errors.New("deposed")
	var fence error = deposed
	p, err := New(Options{Config: testConfig(), Slurm: sl, Now: func() time.Time { return now },
		Price: func(context.Context, *config.Class) (float64, error) { return 0.5, nil }, Fence: func(context.Context) error { return fence }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Tick(context.Background()); !errors.Is(err, deposed) {
		t.Fatalf("a fenced pass: %v, want the fence's error", err)
	}
	if got := sl.take(); len(got) != 0 {
		t.Fatalf("a fenced pass updated nodes: %q", got)
	}
	fence = nil
	if _, err := p.Tick(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sl.take(); len(got) != 1 || got[0] != "a10-[1-3] POWER_UP" {
		t.Errorf("updates once leading %q, want a10-[1-3] POWER_UP", got)
	}
}
