package admit

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
)

// reads records the job IDs a Reader was asked for.
type reads struct {
	*slurmfake.Slurm
	ids     [][]uint32
	filters []slurm.JobFilter
}

func (r *reads) Jobs(ctx context.Context, ids ...uint32) ([]slurm.Job, error) {
	r.ids = append(r.ids, slices.Clone(ids))
	return r.Slurm.Jobs(ctx, ids...)
}

func (r *reads) JobStates(ctx context.Context, f slurm.JobFilter) ([]slurm.JobState, error) {
	r.filters = append(r.filters, f)
	return r.Slurm.JobStates(ctx, f)
}

func writeEntries(t *testing.T, dir string, es []Entry) {
	t.Helper()
	b, err := json.Marshal(doc{Version: 1, Entries: es})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

var burstNodeNames = func() []string {
	var ns []string
	for i := 1; i <= 20; i++ {
		ns = append(ns, fmt.Sprintf("l4-%d", i))
	}
	return ns
}()

func viewOptions(dir string, now time.Time) Options {
	return Options{Dir: dir, Now: func() time.Time { return now },
		Limits:  []Limit{{Account: "a", MaxGPUs: 3}, {User: "u2", MaxNodes: 2}},
		Budgets: map[string]Budget{"b": {CapUSD: 5}},
		Spend:   (&spendSrc{spent: 1, jobs: map[string]float64{"3": 0.5}}).fn,
		Owned:   func(n string) bool { return slices.Contains(burstNodeNames, n) },
		Nodes:   burstNodeNames}
}

// TestViewReadsNoQueue: the view reads the jobs named, the jobs on burst
// nodes no entry accounts for, the released entries' jobs not yet running
// and (releasing) the held entries' jobs, by ID; the jobs on burst nodes
// an entry accounts for come from one squeue filtered by state and node,
// with the entry's account and user; the queue is never read.
func TestViewReadsNoQueue(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	var jobs []slurm.Job
	for id := uint32(100); id < 400; id++ { // the queue
		q := job(id, "PENDING", "a", "u1", 1)
		q.Reason = "Priority"
		jobs = append(jobs, q)
	}
	run := job(1, "RUNNING", "a", "u1", 1) // entered: brief
	run.Nodes = "l4-1"
	byp := job(2, "RUNNING", "c", "u2", 2) // on a burst node, no entry: in full
	byp.Nodes = "l4-2"
	cpu := job(3, "RUNNING", "a", "u1", 1) // not a burst node: not read
	cpu.Nodes = "cpu-1"
	rel := job(4, "PENDING", "a", "u1", 1) // released, not started: in full
	rel.Reason = "Priority"
	held := job(5, "PENDING", "a", "u1", 1) // held entry: only when releasing
	held.Reason, held.AdminComment = "JobHeldAdmin", HeldPrefix+"x"
	named := job(6, "CONFIGURING", "b", "u1", 1)
	named.Nodes = "l4-6"
	jobs = append(jobs, run, byp, cpu, rel, held, named)
	dir := t.TempDir()
	writeEntries(t, dir, []Entry{
		{JobID: 1, Account: "a", User: "u1", GPUs: 1, Nodes: 1, State: StateAdmitted, At: now},
		{JobID: 4, Account: "a", User: "u1", GPUs: 1, Nodes: 1, State: StateReleased, At: now},
		{JobID: 5, Account: "a", User: "u1", GPUs: 1, Nodes: 1, State: StateHeld, At: now},
		{Cluster: "other", JobID: 2, Account: "a", User: "u1", GPUs: 1, Nodes: 1, State: StateAdmitted, At: now},
	})
	c := New(viewOptions(dir, now))
	sl := &reads{Slurm: slurmfake.New(jobs, nil)}
	v, err := c.View(context.Background(), sl, false, 6)
	if err != nil {
		t.Fatal(err)
	}
	if len(sl.filters) != 1 || !slices.Equal(sl.filters[0].States, []string{"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"}) || !slices.Equal(sl.filters[0].Nodes, burstNodeNames) || len(sl.filters[0].IDs) != 0 {
		t.Errorf("job state reads %+v, want one by state and burst node", sl.filters)
	}
	// job 2 is another cluster's entry: here it is a job nobody accounts for
	if len(sl.ids) != 1 || !slices.Equal(sl.ids[0], []uint32{2, 4, 6}) {
		t.Errorf("jobs read %v, want [[2 4 6]]", sl.ids)
	}
	var got []string
	for _, j := range v {
		got = append(got, fmt.Sprintf("%d:%s:%s:%s", j.ID, j.State, j.Account, j.Nodes))
	}
	slices.Sort(got)
	want := []string{"1:RUNNING:a:l4-1", "2:RUNNING:c:l4-2", "4:PENDING:a:", "6:CONFIGURING:b:l4-6"}
	if !slices.Equal(got, want) {
		t.Errorf("view %v, want %v", got, want)
	}
	sl.ids, sl.filters = nil, nil
	if _, err := c.View(context.Background(), sl, true); err != nil {
		t.Fatal(err)
	}
	if len(sl.ids) != 1 || !slices.Equal(sl.ids[0], []uint32{2, 4, 5, 6}) {
		t.Errorf("jobs read releasing %v, want [[2 4 5 6]] (6 holds a burst node, no entry)", sl.ids)
	}
}

// randomCluster is a random cluster's jobs and this cluster's admissions:
// jobs in every state on burst nodes (l4-N) and others (cpu-N), held by
// burst (with or without an entry) or by their user, and entries of every
// state, recent or past their grace and TTL, some for jobs Slurm no
// longer shows. An entered job that holds nodes holds burst nodes: the
// view does not count an entry whose job went to other nodes once its
// grace is over, where every job's list kept it while the job ran.
func randomCluster(rng *rand.Rand, now time.Time) ([]slurm.Job, []Entry) {
	states := []string{"PENDING", "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "COMPLETED"}
	accounts, users := []string{"a", "b", "c"}, []string{"u1", "u2"}
	var jobs []slurm.Job
	var es []Entry
	for id := uint32(1); id <= 40; id++ {
		j := job(id, states[rng.IntN(len(states))], accounts[rng.IntN(3)], users[rng.IntN(2)], 1+rng.IntN(2))
		if j.State == "PENDING" {
			switch rng.IntN(3) {
			case 0:
				j.Reason, j.AdminComment = "JobHeldAdmin", HeldPrefix+"x"
			case 1:
				j.Reason = "JobHeldUser"
			default:
				j.Reason = "Priority"
			}
		} else if rng.IntN(4) == 0 {
			j.Nodes = fmt.Sprintf("cpu-%d", id)
		} else {
			j.Nodes = fmt.Sprintf("l4-%d", 1+rng.IntN(20))
		}
		entered := rng.IntN(2) == 0
		if entered && j.Nodes != "" {
			// burst admitted it for burst nodes (a job of an entry on
			// other nodes counts in the view only until the grace ends)
			j.Nodes = fmt.Sprintf("l4-%d", 1+rng.IntN(20))
		}
		if rng.IntN(10) > 0 {
			jobs = append(jobs, j) // else Slurm forgot it
		}
		if entered {
			st := []string{StateAdmitted, StateHeld, StateReleased}[rng.IntN(3)]
			es = append(es, Entry{JobID: id, Account: j.Account, User: j.User, GPUs: int(j.GPUsPerNode()), Nodes: 1,
				PriceUSD: 0.5, Hours: 1, ReserveUSD: 0.5, State: st, At: now.Add(-time.Duration(rng.IntN(600)) * time.Second)})
		}
	}
	return jobs, es
}

func readEntries(t *testing.T, dir string) []Entry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return decode(b)
}

func withoutHeld(es []Entry) []Entry {
	return slices.DeleteFunc(slices.Clone(es), func(e Entry) bool { return e.State == StateHeld })
}

// TestViewDecidesAsEveryJob: on random clusters, admission decided over the
// view (admit.View, with HeldWithoutEntry when releasing) decides exactly
// as over every job Slurm holds: the same decision, reason and admitted
// entries for a job's admission, the same jobs released in the same order
// and the same admissions after a release pass. (Held entries whose job
// vanished are pruned by release passes only: an admission keeps them.)
func TestViewDecidesAsEveryJob(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(30, 1))
	ctx := context.Background()
	for round := range 250 {
		jobs, es := randomCluster(rng, now)
		dirAll, dirView := t.TempDir(), t.TempDir()
		writeEntries(t, dirAll, es)
		writeEntries(t, dirView, es)
		all, view := New(viewOptions(dirAll, now)), New(viewOptions(dirView, now))
		sl := &reads{Slurm: slurmfake.New(jobs, nil)}
		if rng.IntN(2) == 0 {
			id := uint32(1 + rng.IntN(40))
			n := Need{JobID: id, Account: []string{"a", "b", "c"}[rng.IntN(3)], User: []string{"u1", "u2"}[rng.IntN(2)], GPUs: 1 + rng.IntN(2), Nodes: 1, PriceUSD: 1, TimeLimit: time.Hour}
			v, err := view.View(ctx, sl, false, id)
			if err != nil {
				t.Fatal(err)
			}
			da, err1 := all.Admit(ctx, n, jobs)
			dv, err2 := view.Admit(ctx, n, v)
			if err1 != nil || err2 != nil || da != dv {
				for _, j := range jobs {
					t.Logf("job %d %s %s/%s nodes %q gpus %d", j.ID, j.State, j.Account, j.User, j.Nodes, j.GPUsPerNode())
				}
				for _, e := range es {
					t.Logf("entry %d %s %s/%s at %s", e.JobID, e.State, e.Account, e.User, now.Sub(e.At))
				}
				for _, j := range v {
					t.Logf("view %d %s %s/%s nodes %q", j.ID, j.State, j.Account, j.User, j.Nodes)
				}
				t.Fatalf("round %d: admitting %+v: every job %+v (%v), the view %+v (%v)", round, n, da, err1, dv, err2)
			}
			if a, b := withoutHeld(readEntries(t, dirAll)), withoutHeld(readEntries(t, dirView)); !slices.Equal(a, b) {
				t.Fatalf("round %d: admissions after admitting %+v:\nevery job %+v\nthe view  %+v", round, n, a, b)
			}
		} else {
			v, err := view.View(ctx, sl, true)
			if err != nil {
				t.Fatal(err)
			}
			lost, err := view.HeldWithoutEntry(ctx, sl)
			if err != nil {
				t.Fatal(err)
			}
			ra, err1 := all.ReleaseHeld(ctx, jobs, &fakeSlurm{})
			rv, err2 := view.ReleaseHeld(ctx, append(v, lost...), &fakeSlurm{})
			if err1 != nil || err2 != nil || !slices.Equal(ra, rv) {
				t.Fatalf("round %d: released: every job %v (%v), the view %v (%v)", round, ra, err1, rv, err2)
			}
			if a, b := readEntries(t, dirAll), readEntries(t, dirView); !slices.Equal(a, b) {
				t.Fatalf("round %d: admissions after a release pass:\nevery job %+v\nthe view  %+v", round, a, b)
			}
		}
		for _, ids := range sl.ids {
			if len(ids) == 0 {
				t.Fatalf("round %d: the view read every job", round)
			}
		}
	}
}

// TestHeldReasons: a hold reads as one in each form Slurm gives it.
func TestHeldReasons(t *testing.T) {
	for reason, want := range map[string]bool{
		"JobHeldAdmin": true, "JobHeldUser": true,
		"job requeued in held state": true, "job_requeued_in_held_state": true,
		"Priority": false, "Resources": false, "None": false, "job requeued": false, "": false,
	} {
		j := slurm.Job{ID: 1, State: "PENDING", Reason: reason, AdminComment: HeldPrefix + "x"}
		if got := heldByBurst(j); got != want {
			t.Errorf("reason %q: held by burst %v, want %v", reason, got, want)
		}
	}
	if heldByBurst(slurm.Job{ID: 1, State: "PENDING", Reason: "JobHeldAdmin", AdminComment: "an admin's note"}) {
		t.Error("a hold without burst's comment read as burst's")
	}
}
