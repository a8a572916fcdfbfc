package lifecycle

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

type lingerCall struct {
	nodes   []string
	until   time.Time
	waiting []uint32
}

// TestReleaseHoldsSurvivorsOfARequeuedJob: at the end of the run burst
// requeued after a spot interruption of l4-2, the job's healthy nodes are
// held for its relaunch (and the job poked); the lost node is left to the
// interruption handler (which hands it back once the job is eligible
// again); a drained node is never held. The later, normal end of the
// relaunched run releases everything.
func TestReleaseHoldsSurvivorsOfARequeuedJob(t *testing.T) {
	cfg := demoConfig(t)
	cfg.Teardown.RequeueHold.Duration = 90 * time.Second
	start := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	note := interruption.Note{Lost: []string{"l4-2"}, Instance: "i-0abc", Run: start, Restart: 0, By: "agent", Why: "spot interruption"}
	job := slurm.Job{ID: 7, State: "COMPLETING", Nodes: "l4-[1-4]", StartTime: start, RestartCount: 1, AdminComment: note.String()}
	nodes := []slurm.Node{
		{Name: "l4-1", State: "IDLE", Flags: []string{"CLOUD", "COMPLETING"}},
		{Name: "l4-2", State: "IDLE", Flags: []string{"CLOUD", "DRAIN", "COMPLETING"}, Reason: "burst: spot interruption i-0abc"},
		{Name: "l4-3", State: "IDLE", Flags: []string{"CLOUD", "DRAIN"}, Reason: "admin: bad DIMM"},
		{Name: "l4-4", State: "IDLE", Flags: []string{"CLOUD"}},
	}
	sl := slurmfake.New([]slurm.Job{job}, nodes)
	var lingers []lingerCall
	now := start.Add(time.Minute)
	r := &Releaser{Cfg: cfg, Slurm: sl, Now: func() time.Time { return now },
		Linger: func(n []string, until time.Time, w []uint32) error {
			lingers = append(lingers, lingerCall{n, until, w})
			return nil
		}}
	kept, released, err := r.Release(context.Background(), 7, "l4-[1-4]")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kept, []string{"l4-1", "l4-4"}) || !slices.Equal(released, []string{"l4-3"}) {
		t.Fatalf("kept %v released %v", kept, released)
	}
	if len(lingers) != 1 || !slices.Equal(lingers[0].nodes, []string{"l4-1", "l4-4"}) || !slices.Equal(lingers[0].waiting, []uint32{7}) ||
		!lingers[0].until.Equal(now.Add(90*time.Second)) {
		t.Fatalf("lingers %+v", lingers)
	}
	ups := sl.Updates()
	reasons := map[string]string{}
	for _, u := range ups {
		if u.State != "POWER_DOWN_ASAP" {
			t.Errorf("update %+v", u)
		}
		reasons[u.Names[0]] = u.Reason
	}
	if _, ok := reasons["l4-2"]; ok || reasons["l4-3"] != "burst: job 7 ended" {
		t.Errorf("release reasons %v", reasons)
	}

	j, _ := sl.Job(7)
	if _, ok := interruption.ParseNote(j.AdminComment); ok || !strings.HasPrefix(j.AdminComment, "burst-requeued ") || !strings.HasSuffix(j.AdminComment, "held l4-1,l4-4 for the relaunch") {
		t.Errorf("the note after the hold: %q, want it marked used", j.AdminComment)
	}

	// the relaunched run ends normally: nothing is held
	job.StartTime, job.Nodes, job.AdminComment = start.Add(5*time.Minute), "l4-[1,4]", j.AdminComment
	sl.SetJobs(job)
	sl.SetNodes(nodes[0], nodes[3])
	lingers = nil
	cfg.Teardown.WarmReuse.Duration = 0
	kept, released, err = r.Release(context.Background(), 7, "l4-[1,4]")
	if err != nil || len(kept) != 0 || len(released) != 2 || len(lingers) != 0 {
		t.Fatalf("relaunched run's end: kept %v released %v lingers %v err %v", kept, released, lingers, err)
	}

	// requeue_hold 0: released at once
	job.AdminComment = note.String()
	sl.SetJobs(job)
	cfg.Teardown.RequeueHold.Duration = 0
	if kept, _, _ := r.Release(context.Background(), 7, "l4-[1,4]"); len(kept) != 0 {
		t.Fatalf("requeue_hold 0 kept %v", kept)
	}
}

// TestDrainedNodeNeverKeptWarm: a node drained on a rebalance
// recommendation is released at its job's end even when a waiting job
// fits it.
func TestDrainedNodeNeverKeptWarm(t *testing.T) {
	cfg := demoConfig(t)
	sl := slurmfake.New([]slurm.Job{{ID: 2, State: "PENDING", Reason: "Resources", Features: "l4"}},
		[]slurm.Node{{Name: "l4-1", State: "IDLE", Flags: []string{"CLOUD", "DRAIN"}, Reason: "burst: rebalance recommendation i-1"}})
	r := &Releaser{Cfg: cfg, Slurm: sl, Linger: func([]string, time.Time, []uint32) error { t.Fatal("a drained node was kept"); return nil }}
	kept, released, err := r.Release(context.Background(), 1, "l4-1")
	if err != nil || len(kept) != 0 || !slices.Equal(released, []string{"l4-1"}) {
		t.Fatalf("kept %v released %v err %v", kept, released, err)
	}
	if ups := sl.Updates(); len(ups) != 1 || ups[0].Reason != "burst: rebalance recommendation i-1" {
		t.Fatalf("updates %+v", ups)
	}
}
