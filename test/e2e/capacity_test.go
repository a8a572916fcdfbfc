package e2e

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	ec2p "github.com/burst-hpc/burst/internal/cloud/ec2"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/test/ec2emu"
	"github.com/burst-hpc/burst/test/stack"
)

// reserveL4 creates a targeted capacity reservation of n g6.xlarge in
// us-east-1a in the emulator and names it in class l4's burst.yaml.
func reserveL4(t *testing.T, s *stack.Stack, n int) string {
	t.Helper()
	cr := s.Emu.AddCapacityReservation(ec2emu.CapacityReservationSpec{InstanceType: "g6.xlarge", Zone: "us-east-1a", Count: n, Match: "targeted"})
	if err := s.UpdateConfig(func(c *config.Config) {
		for i := range c.Classes {
			if c.Classes[i].Name == "l4" {
				c.Classes[i].Reservations = config.Reservations{IDs: []string{cr}}
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return cr
}

// jobInstance is the instance launched for job id.
func jobInstance(t *testing.T, s *stack.Stack, id string) ec2emu.Instance {
	t.Helper()
	for _, in := range s.Emu.Instances() {
		if in.Tags[ec2p.TagJobID] == id {
			return in
		}
	}
	t.Fatalf("no instance launched for job %s: %+v", id, s.Emu.Instances())
	return ec2emu.Instance{}
}

// TestCapacityReservationBeforeSpot: class l4 names a capacity reservation
// of its top-ranked type; a job's node is launched into it (RunInstances
// targeting it, tagged reserved) although spot is there, the job runs and
// completes, and the reservation is billed whether used or not while the
// instance itself costs nothing more, in EC2's bill and in burst's ledger
// (the ledger check).
func TestCapacityReservationBeforeSpot(t *testing.T) {
	versionBlind(t)
	s := start(t, stack.Options{})
	cr := reserveL4(t, s, 1)
	id := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "echo node=$SLURMD_NODENAME; sleep 2")
	waitJob(t, s, id, 90*time.Second, "COMPLETED")
	in := jobInstance(t, s, id)
	if in.CapacityReservation != cr || in.Lifecycle != "on-demand" || in.Tags[ec2p.TagCapacity] != "reserved" || in.InstanceType != "g6.xlarge" {
		t.Errorf("job %s ran on %s %s %s in reservation %q tagged %q; want g6.xlarge in %s, tagged reserved", id, in.ID, in.InstanceType, in.Lifecycle,
			in.CapacityReservation, in.Tags[ec2p.TagCapacity], cr)
	}
	if n := s.Emu.CallCount("CreateFleet"); n != 0 {
		t.Errorf("%d CreateFleet calls; the reservation had room, so no spot or on-demand fleet was needed", n)
	}
	eventually(t, 30*time.Second, "instance terminated", func() bool { return len(liveInstances(s)) == 0 })
	for _, b := range s.Emu.Bill() {
		if b.InstanceID == in.ID && (b.USD != 0 || b.Reservation != cr) {
			t.Errorf("EC2 billed the reserved instance %+v; want $0 in %s", b, cr)
		}
	}
	if rb := s.Emu.ReservationBill(); len(rb) != 1 || rb[0].USD <= 0 {
		t.Errorf("reservation bill %+v; want %s billed, used or not", rb, cr)
	}
	reservationMoneyCheck(t, s, cr, in.ID)
}

// reservationMoneyCheck: the Money view's line for reservation cr (after a
// ledger sync has described it) against the emulator's own records: its
// reserved hours are count x its time this month (the emulator's
// reservation bill, read before and after the view), its used hours the
// running time of instance id (the emulator's bill: it ran in cr and
// ended), and its cost and idle cost those hours at the reservation's
// on-demand rate.
func reservationMoneyCheck(t *testing.T, s *stack.Stack, cr, id string) {
	t.Helper()
	ctx := context.Background()
	c, err := s.SizerClient(s.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.LedgerSync(ctx); err != nil {
		t.Fatalf("ledger sync: %v", err)
	}
	used := 0.0
	for _, b := range s.Emu.BillFor(id) {
		if b.Reservation != cr || b.Open {
			t.Fatalf("EC2 bill of %s: %+v; want its closed segments in %s", id, b, cr)
		}
		used += b.End.Sub(b.Start).Seconds()
	}
	reserved := func() (secs, rate float64) {
		for _, b := range s.Emu.ReservationBill() {
			if b.ReservationID == cr {
				from := b.Start
				if m := time.Date(time.Now().UTC().Year(), time.Now().UTC().Month(), 1, 0, 0, 0, 0, time.UTC); m.After(from) {
					from = m // the view is this month's
				}
				end := b.End
				if b.Open {
					end = s.Emu.Now()
				}
				return float64(b.Count) * end.Sub(from).Seconds(), b.USDPerHour / float64(b.Count)
			}
		}
		t.Fatalf("the emulator has no reservation %s", cr)
		return 0, 0
	}
	lo, rate := reserved()
	var v sizerapi.MoneyView
	if err := s.View(sizerapi.PathMoney, &v); err != nil {
		t.Fatal(err)
	}
	hi, _ := reserved()
	lo, hi = lo-2, hi+2 // whole seconds on either side
	if len(v.Reservations) != 1 || v.Reservations[0].ReservationID != cr {
		t.Fatalf("the Money view's reservations %+v, want %s alone", v.Reservations, cr)
	}
	r := v.Reservations[0]
	t.Logf("Money view: %+v; EC2: %.0f-%.0f reserved s, %.0f s used at $%.4f/h", r, lo, hi, used, rate)
	within := func(name string, got, a, b float64) {
		if got < a || got > b {
			t.Errorf("Money view %s = %.4f, want %.4f to %.4f (from EC2's records)", name, got, a, b)
		}
	}
	within("reserved_hours", r.ReservedHours, lo/3600-5e-5, hi/3600+5e-5)
	within("used_hours", r.UsedHours, (used-2)/3600-5e-5, (used+2)/3600+5e-5)
	within("cost_usd", r.CostUSD, lo/3600*rate-5e-5, hi/3600*rate+5e-5)
	within("idle_usd", r.IdleUSD, (lo-used-2)/3600*rate-5e-5, (hi-used+2)/3600*rate+5e-5)
	if r.Kind != "odcr" || r.Count != 1 || r.Instances != 1 || math.Abs(r.PriceUSD-rate) > 1e-4 {
		t.Errorf("Money view %+v: want an ODCR of 1 at $%.4f/h with 1 instance", r, rate)
	}
}

// TestCapacityReservationFullFallsBack: the class's reservation holds one
// instance and a running job uses it; the next job's node falls back to
// spot as the class's order says, and both jobs complete.
func TestCapacityReservationFullFallsBack(t *testing.T) {
	versionBlind(t)
	s := start(t, stack.Options{})
	cr := reserveL4(t, s, 1)
	long := fillReservation(t, s, cr)
	next := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 1")
	waitJob(t, s, next, 90*time.Second, "COMPLETED")
	in := jobInstance(t, s, next)
	if in.CapacityReservation != "" || in.Lifecycle != "spot" || in.Tags[ec2p.TagCapacity] != "spot" {
		t.Errorf("the second job ran on %s (%s, reservation %q, tagged %q); want spot outside the full reservation", in.ID, in.Lifecycle, in.CapacityReservation, in.Tags[ec2p.TagCapacity])
	}
	if _, err := s.Cluster.Run(context.Background(), "scancel", long); err != nil {
		t.Fatal(err)
	}
	waitJob(t, s, long, 60*time.Second, "CANCELLED")
}

// TestCapacityReservationOnlyWaits: with reservations.only the class has
// no spot or on-demand to fall back to: while its one reserved instance is
// taken, the next job's node goes back to Slurm with EC2's
// ReservationCapacityExceeded as the reason, nothing else is launched, and
// the job waits pending.
func TestCapacityReservationOnlyWaits(t *testing.T) {
	versionBlind(t)
	s := start(t, stack.Options{})
	cr := reserveL4(t, s, 1)
	if err := s.UpdateConfig(func(c *config.Config) {
		for i := range c.Classes {
			if c.Classes[i].Name == "l4" {
				c.Classes[i].Reservations.Only = true
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	fillReservation(t, s, cr)
	next := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 1")
	t.Cleanup(func() { s.Cluster.Run(context.Background(), "scancel", next) })
	var reason string
	eventually(t, 60*time.Second, "a node handed back with the reservation's refusal", func() bool {
		out, _ := s.Cluster.Run(context.Background(), "scontrol", "show", "node")
		if i := strings.Index(out, "Reason=burst: ReservationCapacityExceeded"); i >= 0 {
			reason = strings.SplitN(out[i:], "\n", 2)[0]
			return true
		}
		return false
	})
	if all := s.Emu.Instances(); len(all) != 1 {
		t.Errorf("%d instances launched, want only the reserved one (reservations.only): %+v", len(all), all)
	}
	if n := s.Emu.CallCount("CreateFleet"); n != 0 {
		t.Errorf("%d CreateFleet calls; reservations.only must never launch spot or on-demand", n)
	}
	if st := waitJob(t, s, next, 30*time.Second, "PENDING"); st != "PENDING" {
		t.Errorf("the second job is %s, want PENDING (waiting for the reservation)", st)
	}
	t.Logf("node reason: %s", reason)
}

// fillReservation runs a long job on the class l4 and checks its instance
// is in reservation cr; it returns the job's id (cancelled when the test
// ends).
func fillReservation(t *testing.T, s *stack.Stack, cr string) string {
	t.Helper()
	long := sbatch(t, s, "--gres=gpu:1", "--constraint=l4", "--wrap", "sleep 300")
	waitJob(t, s, long, 90*time.Second, "RUNNING")
	t.Cleanup(func() { s.Cluster.Run(context.Background(), "scancel", long) })
	if in := jobInstance(t, s, long); in.CapacityReservation != cr {
		t.Fatalf("the first job's instance %s is in reservation %q, want %s", in.ID, in.CapacityReservation, cr)
	}
	return long
}
