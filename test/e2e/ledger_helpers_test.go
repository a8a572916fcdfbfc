package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/lifecycle"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/test/stack"
)

// ledgerCheck is the end of every end-to-end test (start's cleanup): it
// ends every job, lets burst release every node, and then compares
// burst's recorded spend for each instance with the EC2 emulator's own
// billing record (per second, 60 s minimum per running segment, spot
// reclaimed by EC2 in its first hour waived: burst models the waiver, as
// AWS bills it, so the check compares what is charged): within 1 s and
// the dollars of 1 s for every instance, every instance in both, no
// interval left open. Several stacks share one emulator and one store
// (startStacks): every cluster is drained and its leader settles its own
// instances, and the one ledger is checked against the whole bill.
func ledgerCheck(t *testing.T, stacks ...*stack.Stack) {
	t.Helper()
	ctx := context.Background()
	t0 := time.Now()
	var clients []*sizerclient.Client
	for _, s := range stacks {
		c, err := settle(t, s)
		if err != nil {
			t.Errorf("ledger check (cluster %s): %v", s.Cfg.Cluster.Name, err)
			return
		}
		clients = append(clients, c)
	}
	s := stacks[0] // the emulator is every stack's, and so is the store
	var l sizerapi.Ledger
	var lastSync []sizerapi.LedgerSync
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		open := 0
		lastSync = lastSync[:0]
		for _, c := range clients { // each cluster's leader settles its own instances
			var ls sizerapi.LedgerSync
			if ls, err = c.LedgerSync(ctx); err != nil {
				break
			}
			lastSync, open = append(lastSync, ls), open+ls.Open
		}
		if err == nil {
			l, err = clients[0].Ledger(ctx)
		}
		if err == nil && open == 0 && emuSettled(stacks...) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("ledger check: intervals still open after 60 s (sync %+v, err %v)", lastSync, err)
			break
		}
		time.Sleep(time.Second)
	}
	type emuBill struct {
		secs       int64
		usd        float64
		price      float64
		open       bool
		lines      int
		start, end time.Time // of the first and last segments
	}
	emu := map[string]*emuBill{}
	for _, b := range s.Emu.Bill() {
		e := emu[b.InstanceID]
		if e == nil {
			e = &emuBill{}
			emu[b.InstanceID] = e
		}
		e.secs += b.Seconds
		e.usd += b.USD
		e.price = b.USDPerHour
		e.open = e.open || b.Open
		if e.lines == 0 {
			e.start = b.Start
		}
		e.end = b.End
		e.lines++
	}
	burst := map[string]sizerapi.LedgerInstance{}
	for _, in := range l.Instances {
		burst[in.InstanceID] = in
	}
	var rows []string
	var worst float64
	for _, in := range s.Emu.Instances() {
		e, b := emu[in.ID], burst[in.ID]
		if e == nil {
			e = &emuBill{}
		}
		_, inLedger := burst[in.ID]
		if !inLedger && e.lines > 0 {
			t.Errorf("ledger: instance %s (%s, billed %d s, $%.6f by EC2) is not in burst's ledger", in.ID, in.InstanceType, e.secs, e.usd)
			continue
		}
		if !inLedger {
			continue // never ran: nothing billed anywhere
		}
		dsecs := float64(b.BilledSeconds - e.secs)
		dusd := b.USD - e.usd
		worst = math.Max(worst, math.Abs(dsecs))
		rows = append(rows, fmt.Sprintf("%s %-10s %-9s ec2 %5d s $%.6f | burst %5d s $%.6f at $%.4f/h (ec2 $%.4f/h) ran %s start:%s end:%s/%s%s  d=%+.0fs",
			in.ID, in.InstanceType, b.Capacity, e.secs, e.usd, b.BilledSeconds, b.USD, b.PriceUSD, e.price, b.End.Sub(b.BillingStart).Round(time.Second), b.StartSource, b.EndSource, b.EndReason, waived(b), dsecs))
		tol := math.Max(b.PriceUSD, e.price)/3600 + 1e-9
		if math.Abs(dsecs) > 1 || math.Abs(dusd) > tol {
			t.Errorf("ledger: %s: burst bills %d s $%.6f, EC2 %d s $%.6f (off by %+.0f s, $%+.6f)", in.ID, b.BilledSeconds, b.USD, e.secs, e.usd, dsecs, dusd)
		}
		if b.Open || e.open {
			t.Errorf("ledger: %s still open (burst %v, EC2 %v)", in.ID, b.Open, e.open)
		}
		// the 60 s minimum hides short differences: the times themselves
		// must agree too
		if e.lines > 0 {
			ds, de := b.BillingStart.Sub(e.start).Seconds(), b.End.Sub(e.end).Seconds()
			if math.Abs(ds) > 1 || math.Abs(de) > 1 {
				t.Errorf("ledger: %s: burst bills %v to %v, EC2 %v to %v (start %+.1f s, end %+.1f s)", in.ID, b.BillingStart, b.End, e.start, e.end, ds, de)
			}
			worst = math.Max(worst, math.Max(math.Abs(ds), math.Abs(de)))
		}
	}
	for id, b := range burst {
		if !strings.HasPrefix(id, "i-") {
			continue
		}
		found := false
		for _, in := range s.Emu.Instances() {
			found = found || in.ID == id
		}
		if !found {
			t.Errorf("ledger: burst bills %s ($%.6f), which EC2 never had", id, b.USD)
		}
	}
	ninst := len(rows)
	rows = append(rows, reservationCheck(t, s, l)...)
	sort.Strings(rows)
	t.Logf("ledger check (%s): %d instances, %d capacity reservations, worst difference %.1f s (billed seconds, start, end)\n%s", time.Since(t0).Round(time.Second),
		ninst, len(rows)-ninst, worst, strings.Join(rows, "\n"))
}

// reservationCheck compares burst's bill of each capacity reservation with
// the emulator's (the reserved count at the on-demand rate, used or not,
// from the reservation's start): every reservation in both, the same start
// (1 s), count and hourly rate, and the dollars up to now within 2 s of
// the rate (the two are read a moment apart while a reservation is active).
func reservationCheck(t *testing.T, s *stack.Stack, l sizerapi.Ledger) []string {
	t.Helper()
	burst := map[string]sizerapi.LedgerReservation{}
	for _, r := range l.Reservations {
		burst[r.ReservationID] = r
	}
	var rows []string
	for _, e := range s.Emu.ReservationBill() {
		b, ok := burst[e.ReservationID]
		if !ok {
			t.Errorf("ledger: capacity reservation %s (%d x %s, $%.6f by EC2) is not in burst's ledger", e.ReservationID, e.Count, e.InstanceType, e.USD)
			continue
		}
		delete(burst, e.ReservationID)
		rate := float64(b.Count) * b.PriceUSD
		rows = append(rows, fmt.Sprintf("%s %d x %-10s ec2 %5d s $%.6f at $%.4f/h | burst %5d s $%.6f at $%.4f/h open ec2 %v burst %v",
			e.ReservationID, e.Count, e.InstanceType, e.Seconds, e.USD, e.USDPerHour, b.Seconds, b.USD, rate, e.Open, b.Open))
		if b.Count != e.Count || math.Abs(rate-e.USDPerHour) > 1e-6 || math.Abs(b.Start.Sub(e.Start).Seconds()) > 1 {
			t.Errorf("ledger: reservation %s: burst bills %d from %v at $%.6f/h, EC2 %d from %v at $%.6f/h", e.ReservationID, b.Count, b.Start, rate, e.Count, e.Start, e.USDPerHour)
		}
		if b.Open != e.Open || math.Abs(b.USD-e.USD) > 2*e.USDPerHour/3600+1e-9 {
			t.Errorf("ledger: reservation %s: burst $%.6f (open %v), EC2 $%.6f (open %v)", e.ReservationID, b.USD, b.Open, e.USD, e.Open)
		}
	}
	for id, b := range burst {
		t.Errorf("ledger: burst bills capacity reservation %s ($%.6f), which EC2 never had", id, b.USD)
	}
	return rows
}

func waived(b sizerapi.LedgerInstance) string {
	if b.Waived {
		return " (waived)"
	}
	return ""
}

// settle ends a stack's jobs and releases its nodes (drain), starts its
// sizer again if a test stopped it, and replays what resume and suspend
// journaled while the sizer was away; it returns a client of the sizer.
func settle(t *testing.T, s *stack.Stack) (*sizerclient.Client, error) {
	t.Helper()
	ctx := context.Background()
	if s.Cfg.Warm.Enabled {
		// the warm pool would power nodes up again as fast as they go
		s.StopSizer()
		if err := s.UpdateConfig(func(c *config.Config) { c.Warm.Enabled = false }); err != nil {
			t.Errorf("ledger check: turning the warm pool off: %v", err)
		}
	}
	drain(t, s)
	if s.SizerStopped() {
		if err := s.StartSizer(ctx); err != nil {
			return nil, fmt.Errorf("starting the sizer: %w", err)
		}
	}
	c, err := s.SizerClient(s.Token)
	if err != nil {
		return nil, err
	}
	rec := &lifecycle.JournalRecorder{Sizer: c, Dir: s.Cfg.Sizer.StateDir}
	if _, err := rec.Flush(ctx); err != nil {
		t.Errorf("ledger check: replaying the journal: %v", err)
	}
	return c, nil
}

// emuSettled: every instance of the stacks' clusters is terminated and its
// bill closed.
func emuSettled(stacks ...*stack.Stack) bool {
	for _, s := range stacks {
		mine := map[string]bool{}
		for _, in := range s.Instances() {
			if in.State != "terminated" {
				return false
			}
			mine[in.ID] = true
		}
		for _, b := range s.Emu.Bill() {
			if b.Open && mine[b.InstanceID] {
				return false
			}
		}
	}
	return true
}

// drain cancels every job and waits for burst to release every node; what
// is left after a while is powered down by hand, and what still runs is
// terminated behind burst's back (the ledger must then close it from EC2).
func drain(t *testing.T, s *stack.Stack) {
	t.Helper()
	ctx := context.Background()
	s.Cluster.Run(ctx, "scancel", "--full", "-u", "root")
	if jobs, err := slurmClient(s).Jobs(ctx); err == nil {
		for _, j := range jobs {
			s.Cluster.Run(ctx, "scancel", fmt.Sprint(j.ID))
		}
	}
	live := func() int { return len(liveInstances(s)) }
	end := time.Now().Add(60 * time.Second)
	forced := false
	for live() > 0 && time.Now().Before(end) {
		if !forced && time.Until(end) < 30*time.Second {
			forced = true
			if nodes, err := slurmClient(s).Nodes(ctx); err == nil {
				var ups []string
				for _, n := range nodes {
					if _, ok := s.Cfg.ClassOfNode(n.Name); ok && !n.HasFlag("POWERED_DOWN") {
						ups = append(ups, n.Name)
					}
				}
				if len(ups) > 0 {
					t.Logf("ledger check: powering down %v by hand", ups)
					slurmClient(s).UpdateNodes(ctx, slurm.NodeUpdate{Names: []string{strings.Join(ups, ",")}, State: "POWER_DOWN_FORCE", Reason: "test teardown"})
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n := live(); n > 0 {
		var ids []string
		for _, in := range liveInstances(s) {
			ids = append(ids, in.ID)
		}
		t.Logf("ledger check: terminating %v behind burst's back", ids)
		if _, err := provider(t, s).TerminateIDs(ctx, ids); err != nil {
			t.Errorf("ledger check: terminating leftovers: %v", err)
		}
	}
	eventually(t, 60*time.Second, "every instance terminated", func() bool { return emuSettled(s) })
}
