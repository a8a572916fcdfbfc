package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
)

// TestJobWaits: a job's wait is its latest start's, with Slurm's submit
// time, the nodes of its latest run, the instance alive on each at the
// start (not an earlier one on the same node) and that instance's boot; a
// launch for a new attempt hides the wait until the attempt's start is
// recorded, a replayed older launch does not; StartedWaits gives each
// started job's class and wait. Both drivers.
func TestJobWaits(t *testing.T) { forDrivers(t, testJobWaits) }

func testJobWaits(t *testing.T, d driverCase) {
	ctx := context.Background()
	st := d.fresh(t).open(t)
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	job := sizerapi.Job{JobID: "7", JobName: "ft", User: "ann", Account: "nlp", Class: "l4", GPUsPerNode: 1, Nodes: 1}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	launch := func(id, node string, s int) {
		must(st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: id, Node: node, InstanceType: "g6.xlarge", Capacity: "spot", Account: "nlp", Time: at(s), Job: &job}, 0.5))
		must(st.StartRun(ctx, "k", sizerapi.JobStart{Job: job, Start: at(s)})) // as the launch handler does
	}
	// an earlier instance on the node, gone before the job
	must(st.RecordLaunch(ctx, sizerapi.InstanceEvent{InstanceID: "i-0", Node: "l4-1", InstanceType: "g6.xlarge", Time: at(-3600)}, 0.5))
	if _, err := st.RecordTerminate(ctx, "i-0", at(-1800)); err != nil {
		t.Fatal(err)
	}
	launch("i-1", "l4-1", 5)
	must(st.RecordBoot(ctx, Boot{InstanceID: "i-1", Node: "l4-1", Started: at(40), Slurmd: at(50), Registered: at(52)}))
	must(st.RecordRun(ctx, sizerapi.JobRun{JobID: "7", Account: "nlp", User: "ann", Nodes: []string{"l4-1"}, GPUsPerNode: 1, Start: at(53)}))
	ws, err := st.JobWaits(ctx, []string{"7", "8"})
	must(err)
	if len(ws) != 0 {
		t.Fatalf("waits before the start's submit time was recorded: %+v", ws)
	}
	must(st.StartRun(ctx, "k", sizerapi.JobStart{Job: job, Start: at(53), Submit: at(0)}))
	want := JobWait{JobID: "7", Submitted: at(0), Started: at(53), Nodes: []WaitNode{{Node: "l4-1", InstanceID: "i-1", Launched: at(5),
		Boot: &Boot{InstanceID: "i-1", Node: "l4-1", Started: at(40), Slurmd: at(50), Registered: at(52)}}}}
	check := func(what string, want map[string]JobWait) {
		t.Helper()
		ws, err := st.JobWaits(ctx, []string{"7", "8"})
		must(err)
		if !reflect.DeepEqual(ws, want) {
			t.Errorf("%s: waits\n%+v\nwant\n%+v", what, ws, want)
		}
	}
	check("first start", map[string]JobWait{"7": want})
	// a replayed launch of the first attempt changes nothing
	must(st.StartRun(ctx, "k", sizerapi.JobStart{Job: job, Start: at(5)}))
	check("replayed launch", map[string]JobWait{"7": want})
	ws2, err := st.StartedWaits(ctx, at(0), "")
	must(err)
	if !reflect.DeepEqual(ws2, []ClassWait{{Class: "l4", Wait: 53 * time.Second}}) {
		t.Errorf("started waits: %+v", ws2)
	}
	if ws2, err := st.StartedWaits(ctx, at(54), ""); err != nil || len(ws2) != 0 {
		t.Errorf("started waits after the start: %+v %v", ws2, err)
	}
	if ws2, err := st.StartedWaits(ctx, at(0), "vision"); err != nil || len(ws2) != 0 {
		t.Errorf("another account's started waits: %+v %v", ws2, err)
	}
	// requeued: the new attempt's launch hides the old wait until its own
	// start; it runs on another node, with no boot report
	if _, err := st.RecordTerminate(ctx, "i-1", at(600)); err != nil {
		t.Fatal(err)
	}
	launch("i-2", "l4-2", 700)
	check("new attempt launched", map[string]JobWait{})
	must(st.RecordRun(ctx, sizerapi.JobRun{JobID: "7", Account: "nlp", User: "ann", Nodes: []string{"l4-2"}, GPUsPerNode: 1, Start: at(760)}))
	must(st.StartRun(ctx, "k", sizerapi.JobStart{Job: job, Start: at(761), Submit: at(650)}))
	check("second start", map[string]JobWait{"7": {JobID: "7", Submitted: at(650), Started: at(761), Nodes: []WaitNode{{Node: "l4-2", InstanceID: "i-2", Launched: at(700)}}}})
}
