package ec2

import (
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// TestTerminateReturnsOnlyWhatEC2Accepted: a TerminateInstances that fails
// is not a termination (nothing returned, the error said); one whose
// answer was lost after it took effect is not one either, for burst: EC2's
// own record (ListAll: state, reason, transition time) is what the ledger
// closes it from.
func TestTerminateReturnsOnlyWhatEC2Accepted(t *testing.T) {
	e := newEnv(t, ec2emu.Options{ShutdownDelay: time.Hour, BootDelay: time.Millisecond}, Options{})
	if _, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1", "gpu-2"), Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1a")}}); err != nil {
		t.Fatal(err)
	}
	remove := e.srv.InjectFault(ec2emu.Fault{Action: "TerminateInstances", Code: "UnauthorizedOperation", Count: 100})
	gone, err := e.prov.Terminate(ctx(t), []string{"gpu-1"})
	remove()
	if err == nil || len(gone) != 0 {
		t.Fatalf("failed terminate returned %+v, %v", gone, err)
	}
	if live := e.srv.Live(); len(live) != 2 {
		t.Fatalf("%d live, want 2", len(live))
	}
	remove = e.srv.InjectFault(ec2emu.Fault{Action: "TerminateInstances", Code: "UnauthorizedOperation", Count: 100, AfterEffect: true})
	gone, err = e.prov.Terminate(ctx(t), []string{"gpu-1"})
	remove()
	if err == nil || len(gone) != 0 {
		t.Fatalf("lost-answer terminate returned %+v, %v", gone, err)
	}
	gone, err = e.prov.Terminate(ctx(t), []string{"gpu-2"})
	if err != nil || len(gone) != 1 || gone[0].Node != "gpu-2" {
		t.Fatalf("terminate gpu-2: %+v %v", gone, err)
	}
	all, err := e.prov.ListAll(ctx(t))
	if err != nil || len(all) != 2 {
		t.Fatalf("ListAll %d %v", len(all), err)
	}
	emu := map[string]ec2emu.Instance{}
	for _, in := range e.srv.Instances() {
		emu[in.ID] = in
	}
	for _, in := range all {
		_, want, ok := ParseTransitionReason(emu[in.ID].StateTransitionReason)
		if in.State != "shutting-down" || in.StateReason != "Client.UserInitiatedShutdown" || !ok || !in.StateChanged.Equal(want) || in.ClientToken == "" {
			t.Errorf("%s: %+v (emulator %q)", in.Node, in, emu[in.ID].StateTransitionReason)
		}
	}
}

// TestSpotReclaimReasonAndPrice: EC2's spot reclaim shows as
// Server.SpotInstanceTermination at the time billing ended, and the spot
// price of the pool is the price the emulator bills.
func TestSpotReclaimReasonAndPrice(t *testing.T) {
	e := newEnv(t, ec2emu.Options{BootDelay: time.Millisecond, ShutdownDelay: time.Hour}, Options{})
	res, err := e.prov.Launch(ctx(t), cloud.LaunchRequest{Nodes: nodes(1, "gpu-1"), Offerings: []cloud.Offering{spot("g5.xlarge", "us-east-1b")}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Instances[0].ID
	waitFor(t, func() bool { return len(e.srv.BillFor(id)) == 1 })
	if err := e.srv.Interrupt(id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { b := e.srv.BillFor(id); return len(b) == 1 && !b[0].Open })
	got, err := e.prov.Describe(ctx(t), []string{id})
	if err != nil || len(got) != 1 {
		t.Fatalf("describe %+v %v", got, err)
	}
	bill := e.srv.BillFor(id)[0]
	if got[0].StateReason != "Server.SpotInstanceTermination" || !got[0].StateChanged.Equal(bill.End) {
		t.Errorf("reclaimed: %+v, bill ended %v", got[0], bill.End)
	}
	p, ok, err := e.prov.SpotPrice(ctx(t), "g5.xlarge", "us-east-1b", bill.Start)
	if err != nil || !ok || p != bill.USDPerHour {
		t.Errorf("spot price %v %v %v, billed at %v", p, ok, err, bill.USDPerHour)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("timed out")
}
