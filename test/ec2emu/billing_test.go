package ec2emu_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/test/ec2emu"
)

// runningAt is when the instance's "running" state-change events say it
// entered running, in order.
func runningAt(t *testing.T, s *ec2emu.Server, id string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, e := range s.Events() {
		if e.Event.Detail.InstanceID == id && e.Event.DetailType == ec2emu.DetailStateChange && e.Event.Detail.State == "running" {
			at, err := time.Parse(time.RFC3339, e.Event.Time)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, at)
		}
	}
	return out
}

func spotPriceOf(t *testing.T, c *ec2.Client, typ, zone string) float64 {
	t.Helper()
	h, err := c.DescribeSpotPriceHistory(context.Background(), &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes: []types.InstanceType{types.InstanceType(typ)}, AvailabilityZone: aws.String(zone)})
	if err != nil || len(h.SpotPriceHistory) != 1 {
		t.Fatalf("spot price of %s in %s: %+v %v", typ, zone, h, err)
	}
	p, err := strconv.ParseFloat(aws.ToString(h.SpotPriceHistory[0].SpotPrice), 64)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBillFollowsEC2sRules checks each line against what a client can see
// for itself: the running event's time, the StateTransitionReason of the
// termination, the published prices, per second with a 60 s minimum.
func TestBillFollowsEC2sRules(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 1000, BootDelay: 30 * time.Second, ShutdownDelay: 10 * time.Second})
	ctx := context.Background()
	long := launch1(t, c, false)
	spot := launch1(t, c, true)
	short := launch1(t, c, false)
	for _, id := range []string{long, spot, short} {
		waitState(t, c, id, "running")
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{short}}); err != nil {
		t.Fatal(err)
	}
	open := s.BillFor(long)
	if len(open) != 1 || !open[0].Open || open[0].Seconds < ec2emu.MinBilledSeconds {
		t.Errorf("open line = %+v", open)
	}
	startedLong := runningAt(t, s, long)[0]
	eventually(t, "five emulated minutes", func() bool { return s.Now().Sub(startedLong) > 5*time.Minute })
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{long, spot}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{long, spot, short} {
		waitState(t, c, id, "terminated")
	}
	od, _ := catalog.Default().Lookup("g5.xlarge")
	price := map[string]float64{long: od.OnDemandUSD, short: od.OnDemandUSD, spot: spotPriceOf(t, c, "g5.xlarge", "us-east-1a")}
	for _, id := range []string{long, spot, short} {
		lines := s.BillFor(id)
		if len(lines) != 1 {
			t.Fatalf("%s: %d lines", id, len(lines))
		}
		b := lines[0]
		in := describe(t, c, id)
		_, ended := transitionTime(t, aws.ToString(in.StateTransitionReason))
		secs := int64(ended.Sub(runningAt(t, s, id)[0]) / time.Second)
		want := max(secs, 60)
		switch {
		case b.Open || !b.End.Equal(ended) || !b.Start.Equal(runningAt(t, s, id)[0]):
			t.Errorf("%s: billed %v..%v, events say running at %v, EC2 says it ended at %v", id, b.Start, b.End, runningAt(t, s, id)[0], ended)
		case b.Seconds != want:
			t.Errorf("%s: %d seconds billed, want %d", id, b.Seconds, want)
		case math.Abs(b.USD-float64(want)*price[id]/3600) > 1e-9 || b.USDPerHour != price[id]:
			t.Errorf("%s: %v USD at %v/h, want %d s at %v/h", id, b.USD, b.USDPerHour, want, price[id])
		case b.EndReason != "Client.UserInitiatedShutdown" || b.Start.Sub(aws.ToTime(in.LaunchTime)) < 29*time.Second:
			t.Errorf("%s: %+v (launched %v): pending is not billed", id, b, aws.ToTime(in.LaunchTime))
		}
	}
	if b := s.BillFor(short)[0]; b.Seconds != 60 {
		t.Errorf("a short run is billed %d s, want the 60 s minimum", b.Seconds)
	}
	if b := s.BillFor(long)[0]; b.Seconds < 300 {
		t.Errorf("the long run is billed %d s, want its real length (>= 300 s)", b.Seconds)
	}
	// The control endpoint serves the same record.
	resp, err := http.Get(s.URL() + "/_emu/bill")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []ec2emu.BillLine
	if err := json.NewDecoder(resp.Body).Decode(&lines); err != nil || len(lines) != 3 {
		t.Fatalf("/_emu/bill = %+v %v", lines, err)
	}
	for _, l := range lines {
		if b := s.BillFor(l.InstanceID); len(b) != 1 || !b[0].Start.Equal(l.Start) || !b[0].End.Equal(l.End) || b[0].Seconds != l.Seconds || b[0].USD != l.USD {
			t.Errorf("/_emu/bill line %+v, Bill() %+v", l, b)
		}
	}
}

func TestBillPausesWhileStopped(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 1000, BootDelay: 10 * time.Second, StopDelay: 20 * time.Second, StartDelay: 5 * time.Second})
	id := launch1(t, c, false)
	waitState(t, c, id, "running")
	stopStart(t, c, id)
	lines := s.BillFor(id)
	if len(lines) != 2 {
		t.Fatalf("%d lines after a stop and a start, want 2: %+v", len(lines), lines)
	}
	first, second := lines[0], lines[1]
	// the open line bills at least its 60 s minimum; more when this loaded
	// machine took a while to ask (at TimeScale 1000 a real millisecond is
	// an emulated second)
	if first.Open || !second.Open || first.EndReason != "Client.UserInitiatedShutdown" || second.Seconds < 60 {
		t.Errorf("lines %+v", lines)
	}
	// stopping (20 s) + stopped + pending (5 s) are not billed.
	if gap := second.Start.Sub(first.End); gap < 24*time.Second {
		t.Errorf("billing resumed %v after it stopped, want at least the stop and start delays", gap)
	}
	if !second.LaunchTime.Equal(aws.ToTime(describe(t, c, id).LaunchTime)) {
		t.Errorf("second line's launch %v, DescribeInstances %v", second.LaunchTime, describe(t, c, id).LaunchTime)
	}
}

func TestSpotInterruptedInFirstHourIsNotCharged(t *testing.T) {
	s, c := start(t, ec2emu.Options{TimeScale: 10000, BootDelay: -1, ShutdownDelay: time.Second, TerminatedRetention: -1})
	early := launch1(t, c, true)
	late := launch1(t, c, true)
	waitState(t, c, early, "running")
	waitState(t, c, late, "running")
	if err := s.Interrupt(early); err != nil {
		t.Fatal(err)
	}
	started := runningAt(t, s, late)[0]
	eventually(t, "an emulated hour", func() bool { return s.Now().Sub(started) > 61*time.Minute })
	if err := s.Interrupt(late); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, early, "terminated")
	waitState(t, c, late, "terminated")
	for _, id := range []string{early, late} {
		in := describe(t, c, id)
		who, at := transitionTime(t, aws.ToString(in.StateTransitionReason))
		b := s.BillFor(id)[0]
		if who != "Service" || aws.ToString(in.StateReason.Code) != "Server.SpotInstanceTermination" ||
			aws.ToString(in.StateReason.Message) != "Server.SpotInstanceTermination: Spot instance termination" || !b.End.Equal(at) {
			t.Errorf("%s: %q %+v, line %+v", id, aws.ToString(in.StateTransitionReason), in.StateReason, b)
		}
	}
	if b := s.BillFor(early)[0]; !b.Waived || b.USD != 0 || b.Seconds < 120 {
		t.Errorf("interrupted in its first hour: %+v, want its seconds recorded and no charge", b)
	}
	if b := s.BillFor(late)[0]; b.Waived || b.USD <= 0 || b.Seconds < 3660 {
		t.Errorf("interrupted after an hour: %+v, want charged", b)
	}
	if got := s.BillTotal(); got != s.BillFor(late)[0].USD {
		t.Errorf("total %v", got)
	}
}
