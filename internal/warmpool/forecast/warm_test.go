package forecast

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Expectations below are computed by hand from the Poisson pmf
// p_k = e^-m m^k / k! and the model's equations (see the package doc).
func TestPoissonQuantile(t *testing.T) {
	for _, c := range []struct {
		mean, q float64
		want    int
	}{
		{0, 0.95, 0},
		{-1, 0.95, 0},
		{math.NaN(), 0.95, 0},
		{0.05, 0.95, 0},  // P(0) = e^-0.05 = 0.9512 >= 0.95
		{0.06, 0.95, 1},  // P(0) = 0.9418 < 0.95; P(<=1) = 0.9983
		{0.5, 0.8, 1},    // P(0) = 0.6065; P(<=1) = 0.9098
		{1, 0.95, 3},     // 0.3679, 0.7358, 0.9197, 0.9810
		{2, 0.5, 2},      // 0.1353, 0.4060, 0.6767
		{10, 0.99, 18},   // P(<=17) = 0.9857, P(<=18) = 0.9928
		{100, 0.95, 117}, // P(<=116) = 0.9491, P(<=117) = 0.9571
		{1000, 0.95, 1052},
		{2e5, 0.5, 200000}, // normal branch: ceil(2e5 + 0 - 0.5)
	} {
		if got := PoissonQuantile(c.mean, c.q); got != c.want {
			t.Errorf("PoissonQuantile(%g, %g) = %d, want %d", c.mean, c.q, got, c.want)
		}
	}
}

func TestCapNodes(t *testing.T) {
	for _, c := range []struct {
		usdPerDay, usdPerHour float64
		want                  int
	}{
		{0, 1, 0},
		{-5, 1, 0},
		{10, 0, 0},
		{24, 1, 1},       // exactly one node-day
		{23.99, 1, 0},    // a cent short of one node-day
		{100, 0.5, 8},    // 100 / 12 = 8.33
		{100, 5.4, 0},    // one g5.48xlarge spot node-day is $129.60
		{200, 0.302, 27}, // 200 / 7.248 = 27.59
	} {
		if got := CapNodes(c.usdPerDay, c.usdPerHour); got != c.want {
			t.Errorf("CapNodes(%g, %g) = %d, want %d", c.usdPerDay, c.usdPerHour, got, c.want)
		}
	}
}

// Monday 2026-03-02 00:00 UTC.
var monday = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.6g, want %.6g (+-%g)", what, got, want, tol)
	}
}

func TestRecentRate(t *testing.T) {
	f := NewForecast(Params{HalfLife: 30 * time.Minute, ProfileWeight: -1})
	if r := f.Rate(monday); r != 0 {
		t.Fatalf("empty forecast rate %g, want 0", r)
	}
	f.Observe(monday, 1)
	// r = n / tau with tau = 0.5 h / ln 2: 2 ln 2 = 1.386294 nodes/h
	near(t, "r(t0)", f.Recent(monday), 2*math.Ln2, 1e-9)
	// one half-life later it has halved
	near(t, "r(t0+30m)", f.Recent(monday.Add(30*time.Minute)), math.Ln2, 1e-9)
	near(t, "r(t0+60m)", f.Recent(monday.Add(time.Hour)), math.Ln2/2, 1e-9)
	// an out-of-order arrival counts at the last time seen
	f.Observe(monday.Add(-time.Hour), 2)
	near(t, "r after 3 nodes at t0", f.Recent(monday), 3*2*math.Ln2, 1e-9)

	// a steady 60 nodes/h (one a minute for 10 h): the estimate just after
	// an arrival is (1/tau) / (1 - e^(-60 s/tau)) ~ 1/60 s + 1/(2 tau) =
	// 60.69 /h (10 h is 13.9 tau: the start-up transient is gone)
	g := NewForecast(Params{HalfLife: 30 * time.Minute, ProfileWeight: -1})
	for i := range 600 {
		g.Observe(monday.Add(time.Duration(i)*time.Minute), 1)
	}
	tau := 1800 / math.Ln2
	want := 3600 / tau / (1 - math.Exp(-60/tau))
	near(t, "steady r", g.Recent(monday.Add(599*time.Minute)), want, 1e-3)
	near(t, "steady r vs 60/h", want, 60.69, 0.01)
}

func TestProfile(t *testing.T) {
	// beta 0.3, w 0.5. Week 1: 10 nodes Monday 09:10; week 2: 20 nodes
	// Monday 09:20. At week 3 Monday 09:30 the Monday-09 bin is
	// 0.7 x 10 + 0.3 x 20 = 13 nodes/h; other bins that passed are 0.
	f := NewForecast(Params{HalfLife: 30 * time.Minute, ProfileWeight: 0.5, ProfileLearn: 0.3})
	week := 7 * 24 * time.Hour
	f.Observe(monday.Add(9*time.Hour+10*time.Minute), 10)
	if _, seen := f.Profile(monday.Add(9*time.Hour + 20*time.Minute)); seen {
		t.Errorf("the current hour's bin is seen before the hour closed")
	}
	p, seen := f.Profile(monday.Add(week + 10*time.Hour + 5*time.Minute))
	if !seen || p != 0 {
		t.Errorf("Monday 10:00 bin a week after an empty hour: %g seen %v, want 0 seen", p, seen)
	}
	p, seen = f.Profile(monday.Add(week + 9*time.Hour))
	if !seen || p != 10 {
		t.Errorf("Monday 09:00 of week 2 before anything arrived: %g seen %v, want 10 seen", p, seen)
	}
	f.Observe(monday.Add(week+9*time.Hour+20*time.Minute), 20)
	at := monday.Add(2*week + 9*time.Hour + 30*time.Minute)
	p, seen = f.Profile(at)
	near(t, "Monday-09 profile week 3", p, 13, 1e-9)
	if !seen {
		t.Error("Monday-09 bin not seen")
	}
	// recent rate a week after the last arrival: 20 x 2 ln2 x 2^-(week/30m)
	r := f.Recent(at)
	near(t, "rate = (r + p) / 2", f.Rate(at), (r+13)/2, 1e-9)
	near(t, "recent after a week", r, 0, 1e-9)
	// Profile (read only) and Observe's roll agree: observe at `at` and
	// read the bin back (its count of the hour so far is not in the bin)
	f.Observe(at, 1)
	p2, _ := f.Profile(at)
	near(t, "profile after roll", p2, 13, 1e-9)
	// weeks of silence decay every bin: 9 weeks later beyond the 8-week
	// horizon a bin is 0 but seen
	p, seen = f.Profile(at.Add(9 * week))
	if p != 0 || !seen {
		t.Errorf("after 9 silent weeks: %g seen %v, want 0 seen", p, seen)
	}
	// three silent weeks: two empty closings after the one with count 1
	// ((0.7 x 13 + 0.3 x 1) x 0.7 x 0.7 at week 6, Monday 09:00)
	p, _ = f.Profile(monday.Add(5*week + 9*time.Hour))
	near(t, "decayed bin", p, (0.7*13+0.3*1)*0.7*0.7, 1e-9)
}

func TestBinOf(t *testing.T) {
	for _, c := range []struct {
		at   time.Time
		want int
	}{
		{monday, 0},
		{monday.Add(9 * time.Hour), 9},
		{monday.Add(-time.Hour), 167}, // Sunday 23:00
		{time.Unix(0, 0).UTC(), 72},   // Thursday 1970-01-01 00:00
		{time.Unix(-3600, 0).UTC(), 71},
	} {
		if got := binOf(hourOf(c.at)); got != c.want {
			t.Errorf("bin of %v = %d, want %d", c.at, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	// rate from one burst of 20 nodes at t0 with half-life 30 min:
	// r(t0) = 20 x 2 ln 2 = 27.73 /h; lead 2 min: mean 0.924; q 0.95 -> 3
	// (P(<=2) = 0.9325, P(<=3) = 0.9855)
	p := Params{HalfLife: 30 * time.Minute, ProfileWeight: -1, Quantile: 0.95, LeadTime: 2 * time.Minute}
	newF := func() *Forecast {
		f := NewForecast(p)
		f.Observe(monday, 20)
		return f
	}
	now := monday
	old := now.Add(-10 * time.Minute)
	for _, c := range []struct {
		name    string
		at      time.Time
		cap     int
		state   State
		target  int
		launch  int
		release []string
		cancel  int
		capped  bool
	}{
		{name: "empty pool launches the target", at: now, cap: 10, target: 3, launch: 3},
		{name: "booting nodes count", at: now, cap: 10, state: State{Booting: 2}, target: 3, launch: 1},
		{name: "cap cuts the target", at: now, cap: 1, target: 1, launch: 1, capped: true},
		{name: "zero cap keeps nothing", at: now, cap: 0, state: State{Idle: []Idle{{"a", old, old}}}, target: 0, release: []string{"a"}, capped: true},
		{name: "lingering nodes count towards the target", at: now, cap: 10, state: State{Lingering: 2}, target: 3, launch: 1},
		{name: "above the cap: released at once, booting cancelled", at: now, cap: 1,
			state:  State{Idle: []Idle{{"a", now.Add(-5 * time.Second), now.Add(-5 * time.Second)}, {"b", now, now}}, Booting: 2},
			target: 1, release: []string{"a", "b"}, cancel: 1, capped: true},
		{name: "excess idle released, longest idle first", at: now, cap: 10,
			state:  State{Idle: []Idle{{"b", old.Add(time.Minute), old}, {"a", old, old}, {"c", old.Add(2 * time.Minute), old}, {"d", old.Add(3 * time.Minute), old}, {"e", old.Add(4 * time.Minute), old}}},
			target: 3, release: []string{"a", "b"}},
		{name: "a node idle less than MinIdle stays", at: now, cap: 10,
			state:  State{Idle: []Idle{{"a", now.Add(-30 * time.Second), old}, {"b", old, old}, {"c", old, old}, {"d", old, old}}},
			target: 3, release: []string{"b"}},
		{name: "below the cap: never released before 60 s of billing", at: now.Add(3 * time.Hour), cap: 10,
			state:  State{Idle: []Idle{{"a", now.Add(3*time.Hour - 5*time.Minute), now.Add(3*time.Hour - 50*time.Second)}}},
			target: 0},
		// 2 h later: r = 27.73 / 16 = 1.733 /h, mean 0.0578: P(0) = 0.9439 < 0.95 -> 1
		{name: "forecast drops: keep one", at: now.Add(2 * time.Hour), cap: 10,
			state:  State{Idle: []Idle{{"a", old, old}, {"b", old, old}, {"c", old, old}}},
			target: 1, release: []string{"a", "b"}},
		// 3 h later: r = 0.8664 /h, mean 0.0289: P(0) = 0.9716 -> 0
		{name: "forecast drops: keep none", at: now.Add(3 * time.Hour), cap: 10,
			state:  State{Idle: []Idle{{"a", old, old}}},
			target: 0, release: []string{"a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pl := Decide(newF(), c.at, c.cap, c.state)
			if pl.Target != c.target || pl.Launch != c.launch || pl.Capped != c.capped || pl.Cancel != c.cancel {
				t.Errorf("target %d launch %d cancel %d capped %v (want %d %d %d %v); plan %+v", pl.Target, pl.Launch, pl.Cancel, pl.Capped, c.target, c.launch, c.cancel, c.capped, pl)
			}
			if len(pl.Release) != len(c.release) {
				t.Fatalf("release %v, want %v", pl.Release, c.release)
			}
			for i := range c.release {
				if pl.Release[i] != c.release[i] {
					t.Errorf("release %v, want %v", pl.Release, c.release)
				}
			}
		})
	}
}

func TestParams(t *testing.T) {
	p := Params{}.WithDefaults()
	if p.HalfLife != DefaultHalfLife || p.ProfileWeight != DefaultProfileWeight || p.ProfileLearn != DefaultProfileLearn ||
		p.Quantile != DefaultQuantile || p.LeadTime != DefaultLeadTime || p.MinIdle != DefaultLeadTime {
		t.Errorf("defaults: %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
	if q := (Params{LeadTime: 10 * time.Second}).WithDefaults(); q.MinIdle != time.Minute {
		t.Errorf("MinIdle below the billing minimum: %v", q.MinIdle)
	}
	for _, bad := range []Params{{Quantile: 1}, {Quantile: 1.5}, {ProfileWeight: 2}, {ProfileLearn: 1.5}, {HalfLife: -time.Second}, {LeadTime: -1}} {
		if err := bad.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	f := NewForecast(Params{})
	week := 7 * 24 * time.Hour
	f.Observe(monday.Add(9*time.Hour), 10)
	f.Observe(monday.Add(week+9*time.Hour+5*time.Minute), 4)
	g := NewForecast(Params{})
	if err := g.Restore(f.Snapshot()); err != nil {
		t.Fatal(err)
	}
	at := monday.Add(2*week + 9*time.Hour)
	if f.Rate(at) != g.Rate(at) || f.Target(at) != g.Target(at) {
		t.Errorf("restored forecast differs: %g vs %g", f.Rate(at), g.Rate(at))
	}
	f.Observe(at, 3)
	g.Observe(at, 3)
	if f.Rate(at.Add(time.Hour)) != g.Rate(at.Add(time.Hour)) {
		t.Error("restored forecast learns differently")
	}
	bad := f.Snapshot()
	bad.Profile = bad.Profile[:10]
	if err := g.Restore(bad); err == nil {
		t.Error("short profile restored")
	}
	bad = f.Snapshot()
	bad.Profile[3] = math.NaN()
	if err := g.Restore(bad); err == nil {
		t.Error("NaN restored")
	}
}

// The miss feedback, with expectations worked by hand: each outcome weighs
// a = (1 - q) / 10 = 0.005 at q = 0.95, so after n misses from none the
// rate is 1 - 0.995^n, and the quantile kept is 1 - 0.05^2 / m once m
// passes 0.05.
func TestMissFeedback(t *testing.T) {
	f := NewForecast(Params{Quantile: 0.95})
	if q := f.Quantile(); q != 0.95 {
		t.Fatalf("quantile before any outcome %g, want 0.95", q)
	}
	for range 10 {
		f.Outcome(false)
	}
	// 1 - 0.995^10 = 0.048890: not yet above 1 - q
	near(t, "miss rate after 10 misses", f.MissRate(), 0.0488899, 1e-6)
	if q := f.Quantile(); q != 0.95 {
		t.Errorf("quantile at a miss rate below 0.05: %g, want 0.95", q)
	}
	f.Outcome(false)
	// 1 - 0.995^11 = 0.0536458; 1 - 0.0025 / 0.0536458 = 0.953398
	near(t, "miss rate after 11 misses", f.MissRate(), 0.0536458, 1e-6)
	near(t, "quantile after 11 misses", f.Quantile(), 0.953398, 1e-6)
	for range 2000 {
		f.Outcome(false)
	}
	// m = 1 - 0.995^2011 = 0.999958: the quantile nears 1 - 0.05^2 = 0.9975
	near(t, "quantile when every job is missed", f.Quantile(), 0.9974999, 1e-6)
	g := NewForecast(Params{Quantile: 0.95, HalfLife: time.Hour, ProfileWeight: -1, LeadTime: time.Hour})
	g.Observe(monday, 1) // r = 1 / tau = ln 2 per hour
	at := monday
	mean := g.Rate(at) * 1 // lead time 1 h
	near(t, "mean", mean, math.Ln2, 1e-9)
	// ln 2 = 0.6931: P(0) = 0.5, P(<=1) = 0.8466, P(<=2) = 0.9667, P(<=3) = 0.99443, P(<=4) = 0.99924
	if got := g.Target(at); got != 2 {
		t.Errorf("target at q 0.95 and mean ln 2: %d, want 2", got)
	}
	for range 2011 {
		g.Outcome(false)
	}
	if got := g.Target(at); got != 4 {
		t.Errorf("target at q 0.9975 and mean ln 2: %d, want 4", got)
	}
	if p := Decide(g, at, 10, State{}); p.Want != 4 || math.Abs(p.Quantile-0.9974999) > 1e-6 || p.Launch != 4 {
		t.Errorf("plan %+v, want 4 wanted and launched at quantile 0.9975", p)
	}
	// hits bring it back: m = 0.999958 x 0.995^n falls to 0.05 after
	// ln(0.05 / 0.999958) / ln 0.995 = 597.6 outcomes
	for range 597 {
		g.Outcome(true)
	}
	if q := g.Quantile(); q == 0.95 {
		t.Errorf("quantile back to 0.95 after 597 hits (miss rate %g, want just above 0.05)", g.MissRate())
	}
	g.Outcome(true)
	if q := g.Quantile(); q != 0.95 {
		t.Errorf("quantile after 598 hits %g (miss rate %g), want 0.95", q, g.MissRate())
	}
	// FixedQuantile: misses change nothing
	h := NewForecast(Params{Quantile: 0.95, FixedQuantile: true})
	for range 500 {
		h.Outcome(false)
	}
	if q := h.Quantile(); q != 0.95 || h.MissRate() < 0.9 {
		t.Errorf("fixed quantile %g (miss rate %g), want 0.95", q, h.MissRate())
	}
}

func TestMissRateSnapshot(t *testing.T) {
	f := NewForecast(Params{})
	f.Observe(monday, 1)
	for range 30 {
		f.Outcome(false)
	}
	s := f.Snapshot()
	g := NewForecast(Params{})
	if err := g.Restore(s); err != nil {
		t.Fatal(err)
	}
	if g.MissRate() != f.MissRate() || g.Quantile() != f.Quantile() {
		t.Errorf("restored miss rate %g / quantile %g, want %g / %g", g.MissRate(), g.Quantile(), f.MissRate(), f.Quantile())
	}
	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		s.MissRate = bad
		if err := g.Restore(s); err == nil || !strings.Contains(err.Error(), "miss rate") {
			t.Errorf("restoring miss rate %g: %v, want an error naming it", bad, err)
		}
	}
}
