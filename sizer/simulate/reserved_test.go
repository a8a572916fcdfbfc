package simulate

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/sizer/trace"
)

// reservedTrace: A (0 s, 1 h, 8 GPUs), B (1800 s, 1 h, 8 GPUs, while A
// holds the reserved node), C (7200 s, 10 min, 1 GPU: another class), D
// (9000 s, 30 min, 16 GPUs: two nodes, one reserved node free), E
// (11000 s, 1000 s, 8 GPUs).
func reservedTrace() []trace.Job {
	return []trace.Job{job(0, 3600, 8), job(1800, 3600, 8), job(7200, 600, 1), job(9000, 1800, 16), job(11000, 1000, 8)}
}

// TestReservationHandWorked runs the trace above with one reserved tst.8x
// (handOptions: fixed 120 s boot, 2 min warm window, spot tst.8x $3.20/h,
// tst.1x $0.40/h, no warm pool, no interruptions).
//
// With the reservation: A runs on it 0-3600 (wait 0). B launches spot at
// 1800, up 1920, ends 5520, released 5640: 3840 s. C launches tst.1x spot
// at 7200, released 8040: 840 s. D needs 2 nodes, only 1 reserved is free:
// all from spot, 9000 to 11040: 2 x 2040 s. E runs on the reservation
// 11000-12000 (wait 0): the run ends at 12000, the reservation is billed
// 0-12000 and used 3600 + 1000 = 4600 node-seconds (38.33%).
// Spot: (3840 + 2 x 2040) s x $3.20/h + 840 s x $0.40/h = $7.04 + $0.09333.
//
// Without: A spot 0-3840, B spot 1800-5640, C as above, D two nodes from
// 9000; E takes D's newest idle node at 11000 (its window ends at 11040),
// runs to 12000, released 12120. tst.8x spot seconds 3840 + 3840 + 2040 +
// 3120 = 12840: $11.41333, plus C: $11.50667.
func TestReservationHandWorked(t *testing.T) {
	const spot8, without = 7.04, 12840*3.2/3600 + 840*0.4/3600
	cases := []struct {
		name      string
		r         Reservation
		price     float64 // USD per instance-hour billed
		bill      float64
		with      float64
		savedUSD  float64
		idleCost  float64
		utilPct   float64
		heldHours float64
	}{
		{name: "odcr at the on-demand rate", r: Reservation{Kind: ReservationODCR, Type: "tst.8x", Nodes: 1},
			price: 8, bill: 8 * 12000.0 / 3600, with: 8*12000.0/3600 + spot8 + 840*0.4/3600,
			savedUSD: without - (8*12000.0/3600 + spot8 + 840*0.4/3600), idleCost: 8 * 7400.0 / 3600, utilPct: 100 * 4600.0 / 12000, heldHours: 12000.0 / 3600},
		{name: "capacity block at $1/h", r: Reservation{Kind: ReservationBlock, Type: "tst.8x", Nodes: 1, USDPerHour: 1},
			price: 1, bill: 12000.0 / 3600, with: 12000.0/3600 + spot8 + 840*0.4/3600,
			savedUSD: without - (12000.0/3600 + spot8 + 840*0.4/3600), idleCost: 7400.0 / 3600, utilPct: 100 * 4600.0 / 12000, heldHours: 12000.0 / 3600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := handOptions(t)
			o.Policies = []string{PolicyBurst}
			o.Reserved = tc.r
			res, err := Run(context.Background(), o, reservedTrace())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Policies) != 2 || res.Policies[0].Name != PolicyBurst || res.Policies[1].Name != PolicyBurstReserved {
				t.Fatalf("policies %+v; want burst then burst+reserved", res.Policies)
			}
			used := (8*3600 + 8*3600 + 600 + 16*1800 + 8*1000) / 3600.0
			check(t, res.Policies[0], want{cost: without, billed: (8*12840 + 840) / 3600.0, used: used,
				idle: (8*12840+840)/3600.0 - used, p50: 120, p95: 120, launches: 5})
			billed := (8*12000 + 8*3840 + 840 + 16*2040) / 3600.0
			check(t, res.Policies[1], want{cost: tc.with, billed: billed, used: used, idle: billed - used, p50: 120, p95: 120, launches: 4})
			rr := res.Reservation
			if rr == nil {
				t.Fatal("no reservation result")
			}
			eq := func(name string, g, w float64) {
				if math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
					t.Errorf("%s = %.12g, want %.12g", name, g, w)
				}
			}
			eq("usd per instance-hour", rr.USDPerHour, tc.price)
			eq("held hours", rr.HeldHours, tc.heldHours)
			eq("bill", rr.BillUSD, tc.bill)
			eq("used node-hours", rr.UsedNodeHours, 4600.0/3600)
			eq("utilisation", rr.UtilisationPct, tc.utilPct)
			eq("idle cost", rr.IdleCostUSD, tc.idleCost)
			eq("cost with", rr.CostWithUSD, tc.with)
			eq("cost without", rr.CostWithoutUSD, without)
			eq("saved", rr.SavedUSD, tc.savedUSD)
			eq("saved pct", rr.SavedPct, 100*tc.savedUSD/without)
			// spot besides the reservation: $7.13333 either way; without
			// $11.50667; 1 node x 12000 s: break-even $1.31200/h
			eq("break-even", rr.BreakEvenUSDPerHour, (without-spot8-840*0.4/3600)/(12000.0/3600))
			if last := res.Policies[1].Series[len(res.Policies[1].Series)-1]; math.Abs(last.CostUSD-tc.with) > 1e-9 {
				t.Errorf("burst+reserved chart ends at $%g, total is $%g", last.CostUSD, tc.with)
			}
			if rr.Jobs != 2 || rr.Nodes != 1 || rr.Type != "tst.8x" || rr.Kind != tc.r.Kind {
				t.Errorf("reservation %+v; want 2 jobs on 1 tst.8x (%s)", rr, tc.r.Kind)
			}
			if got := res.Policies[1].WarmStarts; got != 2 {
				t.Errorf("burst+reserved warm starts %d, want 2 (A and E on the reserved node)", got)
			}
			var b strings.Builder
			if err := WriteTable(&b, res); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"burst+reserved", "reservation: 1 x tst.8x (" + tc.r.Kind, "against " + money(without) + " with none"} {
				if !strings.Contains(b.String(), s) {
					t.Errorf("table does not say %q:\n%s", s, b.String())
				}
			}
		})
	}
}

func TestReservationBadOptions(t *testing.T) {
	o := handOptions(t)
	o.Policies = []string{PolicyIdleTimeout}
	o.Reserved = Reservation{Kind: "savings-plan", Type: "tst.9x", Nodes: 2, USDPerHour: math.NaN()}
	_, err := Run(context.Background(), o, []trace.Job{job(0, 1, 1)})
	if err == nil {
		t.Fatal("no error for a bad reservation")
	}
	for _, s := range []string{`reservation kind "savings-plan"`, `reservation type "tst.9x"`, "reservation price NaN", "include burst"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	o = handOptions(t)
	o.Reserved = Reservation{Kind: ReservationBlock, Type: "tst.8x", Nodes: 1}
	if _, err := Run(context.Background(), o, []trace.Job{job(0, 1, 1)}); err == nil || !strings.Contains(err.Error(), "needs its price per instance-hour") {
		t.Errorf("a capacity block without a price: %v", err)
	}
}

// TestReservationPhilly runs the first 5,000 Philly jobs (../shared/data)
// with 4 reserved nodes of the static cluster's default type and checks
// the reservation's accounting: the same work, the bill whole, used plus
// idle cost equal to the bill, and the comparison against burst without.
func TestReservationPhilly(t *testing.T) {
	jobs := loadPhilly(t)[:5000]
	o := Options{Seed: 7, Policies: []string{PolicyBurst}, Reserved: Reservation{Nodes: 4}}
	res, err := Run(context.Background(), o, jobs)
	if err != nil {
		t.Fatal(err)
	}
	burst, with, rr := res.Policies[0], res.Policies[1], res.Reservation
	g5, ok := catalog.Default().Lookup("g5.48xlarge")
	if !ok {
		t.Fatal("g5.48xlarge is not in the catalog")
	}
	if rr == nil || rr.Type != "g5.48xlarge" || rr.Kind != ReservationODCR || rr.USDPerHour != g5.OnDemandUSD {
		t.Fatalf("reservation %+v; want an ODCR of g5.48xlarge at $%g/h (the cheapest 8-GPU a10g type)", rr, g5.OnDemandUSD)
	}
	if math.Abs(with.GPUHoursUsed-burst.GPUHoursUsed) > 1e-6*burst.GPUHoursUsed {
		t.Errorf("used %g GPU-h with the reservation, %g without", with.GPUHoursUsed, burst.GPUHoursUsed)
	}
	if math.Abs(rr.BillUSD-4*g5.OnDemandUSD*rr.HeldHours) > 1e-6*rr.BillUSD {
		t.Errorf("bill $%g for 4 nodes x %g h x $%g", rr.BillUSD, rr.HeldHours, g5.OnDemandUSD)
	}
	if math.Abs(rr.UsedNodeHours*rr.USDPerHour+rr.IdleCostUSD-rr.BillUSD) > 1e-6*rr.BillUSD {
		t.Errorf("used %g node-h x $%g + idle $%g != bill $%g", rr.UsedNodeHours, rr.USDPerHour, rr.IdleCostUSD, rr.BillUSD)
	}
	if rr.Jobs == 0 || !(rr.UtilisationPct > 0 && rr.UtilisationPct <= 100) {
		t.Errorf("reservation ran %d jobs at %g%% utilisation", rr.Jobs, rr.UtilisationPct)
	}
	if rr.CostWithUSD != with.CostUSD || rr.CostWithoutUSD != burst.CostUSD || with.CostUSD < rr.BillUSD {
		t.Errorf("with $%g (row $%g, bill $%g), without $%g (row $%g)", rr.CostWithUSD, with.CostUSD, rr.BillUSD, rr.CostWithoutUSD, burst.CostUSD)
	}
	if last := with.Series[len(with.Series)-1]; math.Abs(last.CostUSD-with.CostUSD) > 1e-6*with.CostUSD {
		t.Errorf("chart ends at $%g, total is $%g", last.CostUSD, with.CostUSD)
	}
	t.Logf("4 x g5.48xlarge ODCR over %.1f d: bill $%.0f, utilisation %.1f%%, idle $%.0f; burst $%.0f with, $%.0f without (saved %+.1f%%)",
		rr.HeldHours/24, rr.BillUSD, rr.UtilisationPct, rr.IdleCostUSD, rr.CostWithUSD, rr.CostWithoutUSD, rr.SavedPct)
}

func TestCommandReserved(t *testing.T) {
	tr := writeTrace(t, "0,3600,8\n1800,3600,8\n")
	out, err := runCLI(t, "", "simulate", "--trace", tr, "--json", "--policies", "burst", "--reserved", "1", "--reserved-type", "g5.48xlarge",
		"--reserved-kind", ReservationBlock, "--reserved-usd-per-hour", "5")
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	rr := res.Reservation
	if rr == nil || rr.Kind != ReservationBlock || rr.Type != "g5.48xlarge" || rr.USDPerHour != 5 || rr.Jobs != 1 || len(res.Policies) != 2 {
		t.Errorf("reservation %+v, policies %d", rr, len(res.Policies))
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--reserved", "-1"}, "--reserved -1"},
		{[]string{"--reserved-type", "g5.xlarge"}, "need --reserved N"},
		{[]string{"--reserved", "1", "--reserved-kind", ReservationBlock}, "needs its price per instance-hour"},
		{[]string{"--reserved", "1", "--policies", "static"}, "include burst"},
		{[]string{"--reserved", "1", "--sweep"}, "--sweep does not model reservations"},
	} {
		_, err := runCLI(t, "", append([]string{"simulate", "--trace", tr}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one mentioning %q", c.args, err, c.want)
		}
	}
}
