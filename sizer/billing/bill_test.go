package billing

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestBill: each case's expected figures are worked out by hand from EC2's
// rules (running time only, per second, 60 s minimum per segment, spot
// reclaimed within the first hour free).
func TestBill(t *testing.T) {
	const h = time.Hour
	cases := []struct {
		name  string
		in    Instance
		secs  int64
		usd   float64
		gross float64
		open  bool
	}{
		{"no events: from the launch, 60 s minimum", Instance{Capacity: "on-demand", PriceUSD: 3.6, Launched: t0, End: at(30 * time.Second)}, 60, 0.06, 0.06, false},
		{"running to shutting-down", Instance{Capacity: "spot", PriceUSD: 3.6, Launched: t0, End: at(10*time.Minute + 9*time.Second),
			States: []StateEvent{{"shutting-down", at(10*time.Minute + 5*time.Second)}, {"pending", t0}, {"running", at(5 * time.Second)}, {"running", at(5 * time.Second)}}}, 600, 0.6, 0.6, false},
		{"stop and start: two segments, each at least 60 s", Instance{Capacity: "on-demand", PriceUSD: 3.6, Launched: t0, End: at(h + 20*time.Second),
			States: []StateEvent{{"running", t0}, {"stopping", at(30 * time.Minute)}, {"stopped", at(31 * time.Minute)}, {"running", at(h)}, {"shutting-down", at(h + 20*time.Second)}}}, 1860, 1.86, 1.86, false},
		{"spot reclaimed in the first hour: waived", Instance{Capacity: "spot", PriceUSD: 3.6, EndReason: SpotWaiverCode, End: at(30 * time.Minute),
			States: []StateEvent{{"running", t0}}}, 1800, 0, 1.8, false},
		{"spot reclaimed after the first hour: charged", Instance{Capacity: "spot", PriceUSD: 3.6, EndReason: SpotWaiverCode, End: at(2 * h),
			States: []StateEvent{{"running", t0}, {"shutting-down", at(2 * h)}}}, 7200, 7.2, 7.2, false},
		{"terminated by the user in its first hour: charged", Instance{Capacity: "spot", PriceUSD: 3.6, EndReason: "Client.UserInitiatedShutdown", End: at(30 * time.Minute),
			States: []StateEvent{{"running", t0}}}, 1800, 1.8, 1.8, false},
		{"events but never running: nothing", Instance{Capacity: "spot", PriceUSD: 3.6, Launched: t0, End: at(time.Second),
			States: []StateEvent{{"pending", t0}, {"shutting-down", at(time.Second)}}}, 0, 0, 0, false},
		{"still running: up to now", Instance{Capacity: "spot", PriceUSD: 3.6, States: []StateEvent{{"running", at(-90*time.Second - 500*time.Millisecond)}}}, 90, 0.09, 0.09, true},
	}
	for _, c := range cases {
		bs := c.in.Bill(t0)
		secs, usd, gross := Total(bs)
		open := len(bs) > 0 && bs[len(bs)-1].Open
		if secs != c.secs || !near(usd, c.usd) || !near(gross, c.gross) || open != c.open {
			t.Errorf("%s: %d s $%.4f (gross $%.4f) open %v, want %d s $%.4f ($%.4f) %v", c.name, secs, usd, gross, open, c.secs, c.usd, c.gross, c.open)
		}
	}
}

// TestCharges: a node launched for job A, reused warm by job B of another
// account: each pays for its own run, the boot, the idle gap and the tail
// go to the launching job (or the class's pool).
func TestCharges(t *testing.T) {
	in := Instance{ID: "i-1", Node: "l4-1", Class: "l4", Capacity: "on-demand", PriceUSD: 3.6, OnDemandUSD: 3.6, Account: "nlp", User: "ann", JobID: "1",
		States: []StateEvent{{"running", t0}, {"shutting-down", at(20 * time.Minute)}},
		Runs: []Run{{JobID: "1", Account: "nlp", User: "ann", GPUs: 1, Start: at(time.Minute), End: at(11 * time.Minute)},
			{JobID: "2", Account: "bio", User: "bob", GPUs: 1, Start: at(12 * time.Minute), End: at(19 * time.Minute)}}}
	from, to := MonthStart(t0), t0.AddDate(0, 1, 0)
	got := map[string]Charge{}
	for _, c := range in.Charges(from, to, t0.Add(time.Hour), OwnerLaunchingJob) {
		k := c.JobID
		if c.Idle {
			k = "idle"
		}
		got[k] = c
	}
	for k, want := range map[string]struct {
		acct string
		secs float64
	}{"1": {"nlp", 600}, "2": {"bio", 420}, "idle": {"nlp", 180}} {
		if c := got[k]; c.Account != want.acct || !near(c.Seconds, want.secs) || !near(c.USD, want.secs/1000) {
			t.Errorf("%s: %+v, want %s %.0f s", k, c, want.acct, want.secs)
		}
	}
	if got["idle"].JobID != "1" {
		t.Errorf("idle time owned by job %q, want the launching job 1", got["idle"].JobID)
	}
	pool := in.Charges(from, to, t0.Add(time.Hour), OwnerPool)
	if last := pool[len(pool)-1]; !last.Idle || last.Account != "pool:l4" || last.JobID != "" || !near(last.Seconds, 180) {
		t.Errorf("pool owner: %+v", last)
	}
	acct, jobs := spend([]Instance{in}, from, to, t0.Add(time.Hour), OwnerLaunchingJob)
	if !near(acct["nlp"], 0.78) || !near(acct["bio"], 0.42) || !near(jobs["1"], 0.78) || !near(jobs["2"], 0.42) {
		t.Errorf("spend %v jobs %v", acct, jobs)
	}
}

// TestChargesSharedNodeAndWindow: two jobs on one 4-GPU node share its
// time by GPUs; a bill is split at the month boundary.
func TestChargesSharedNodeAndWindow(t *testing.T) {
	in := Instance{ID: "i-2", Capacity: "on-demand", PriceUSD: 3.6, Account: "nlp", JobID: "1",
		States: []StateEvent{{"running", t0}, {"shutting-down", at(10 * time.Minute)}},
		Runs:   []Run{{JobID: "1", Account: "nlp", GPUs: 3, Start: t0, End: at(10 * time.Minute)}, {JobID: "2", Account: "bio", GPUs: 1, Start: t0, End: at(10 * time.Minute)}}}
	far := t0.AddDate(1, 0, 0)
	got := map[string]float64{}
	for _, c := range in.Charges(time.Time{}, far, far, OwnerLaunchingJob) {
		got[c.JobID] += c.Seconds
	}
	if !near(got["1"], 450) || !near(got["2"], 150) {
		t.Errorf("shares %v, want 450 and 150 s", got)
	}
	// a segment across a boundary: each side gets its own part
	cut := at(4 * time.Minute)
	a, _ := spend([]Instance{in}, time.Time{}, cut, far, OwnerLaunchingJob)
	b, _ := spend([]Instance{in}, cut, far, far, OwnerLaunchingJob)
	if !near(a["nlp"]+b["nlp"]+a["bio"]+b["bio"], 0.6) || !near(a["nlp"]+a["bio"], 0.24) {
		t.Errorf("before %v after %v", a, b)
	}
	if burn := Burn([]Instance{{PriceUSD: 2, Account: "nlp", States: []StateEvent{{"running", t0}}, Runs: in.Runs}}, at(time.Minute), OwnerLaunchingJob); !near(burn["nlp"], 1.5) || !near(burn["bio"], 0.5) {
		t.Errorf("burn %v", burn)
	}
}

func TestForecast(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	if f := Forecast(100, 40, 10, 5, now); !f.Equal(now.Add(10 * time.Hour)) {
		t.Errorf("forecast %v", f)
	}
	if f := Forecast(100, 95, 10, 5, now); !f.Equal(now) {
		t.Errorf("already there: %v", f)
	}
	if f := Forecast(100, 40, 0, 0, now); !f.IsZero() {
		t.Errorf("no burn: %v", f)
	}
	if f := Forecast(1e6, 0, 0, 1, now); !f.IsZero() {
		t.Errorf("not this month: %v", f)
	}
}

// TestChargesWithoutLaunchingJob: an instance launched for no job (the
// warm pool, a manual power-up) charges its idle time to its class's pool.
func TestChargesWithoutLaunchingJob(t *testing.T) {
	in := Instance{ID: "i-3", Class: "l4", Capacity: "on-demand", PriceUSD: 3.6, States: []StateEvent{{"running", t0}, {"shutting-down", at(10 * time.Minute)}},
		Runs: []Run{{JobID: "9", Account: "bio", Start: at(2 * time.Minute), End: at(5 * time.Minute)}}}
	cs := in.Charges(time.Time{}, t0.AddDate(0, 1, 0), t0.AddDate(0, 1, 0), OwnerLaunchingJob)
	if len(cs) != 2 || cs[0].Account != "bio" || !near(cs[0].Seconds, 180) || cs[1].Account != "pool:l4" || !near(cs[1].Seconds, 420) {
		t.Fatalf("charges %+v", cs)
	}
	if b := Burn([]Instance{{Class: "l4", PriceUSD: 2, States: []StateEvent{{"running", t0}}}}, at(time.Minute), OwnerLaunchingJob); b["pool:l4"] != 2 {
		t.Fatalf("burn %v", b)
	}
}

// spend sums the charges of the instances within [from, to) by account and
// by job, as sizer/spend's Month does.
func spend(ins []Instance, from, to, now time.Time, owner string) (byAccount, byJob map[string]float64) {
	byAccount, byJob = map[string]float64{}, map[string]float64{}
	for _, in := range ins {
		for _, c := range in.Charges(from, to, now, owner) {
			byAccount[c.Account] += c.USD
			if c.JobID != "" {
				byJob[c.JobID] += c.USD
			}
		}
	}
	return byAccount, byJob
}
