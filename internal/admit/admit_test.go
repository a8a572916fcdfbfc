package admit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/slurm"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type spendSrc struct {
	mu    sync.Mutex
	spent float64
	jobs  map[string]float64
	err   error
}

func (s *spendSrc) fn(_ context.Context, account string) (sizerapi.AccountSpend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return sizerapi.AccountSpend{}, s.err
	}
	return sizerapi.AccountSpend{Account: account, SpentUSD: s.spent, Jobs: s.jobs}, nil
}

type fakeSlurm struct {
	released, started []uint32
	notes             map[uint32]string
}

func (f *fakeSlurm) SetAdminComment(_ context.Context, id uint32, text string) error {
	if f.notes == nil {
		f.notes = map[uint32]string{}
	}
	f.notes[id] = text
	return nil
}

func (f *fakeSlurm) Release(_ context.Context, id uint32) error {
	f.released = append(f.released, id)
	return nil
}
func (f *fakeSlurm) StartNow(_ context.Context, id uint32) error {
	f.started = append(f.started, id)
	return nil
}

func job(id uint32, state, account, user string, gpus int) slurm.Job {
	j := slurm.Job{ID: id, State: state, Account: account, User: user, NodeCount: 1}
	if state != "PENDING" {
		j.Nodes = fmt.Sprintf("l4-%d", id)
	}
	if gpus > 0 {
		j.GRESPerNode = []slurm.GRES{{Name: "gpu", Count: uint64(gpus)}}
	}
	return j
}

func need(id uint32, account string, price float64, tl time.Duration) Need {
	return Need{JobID: id, Account: account, User: "ann", GPUs: 1, Nodes: 1, PriceUSD: price, TimeLimit: tl}
}

func TestBudgetReservations(t *testing.T) {
	clk := &clock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	sp := &spendSrc{jobs: map[string]float64{}}
	c := New(Options{Dir: t.TempDir(), Budgets: map[string]Budget{"nlp": {CapUSD: 10}}, Spend: sp.fn, Now: clk.now})
	ctx := context.Background()
	var jobs []slurm.Job
	for id := uint32(1); id <= 3; id++ {
		jobs = append(jobs, job(id, "CONFIGURING", "nlp", "ann", 1))
	}
	for id := uint32(1); id <= 3; id++ {
		d, err := c.Admit(ctx, need(id, "nlp", 1, 4*time.Hour), jobs)
		if err != nil {
			t.Fatal(err)
		}
		if want := id <= 2; d.Admitted != want || d.ReserveUSD != 4 {
			t.Fatalf("job %d: %+v, want admitted %v", id, d, want)
		}
		if id == 3 && !strings.Contains(d.Reason, "account nlp has $8.00 of its $10.00 monthly budget spent or reserved; this job reserves $4.00 ($1.0000/h x 4h0m0s)") {
			t.Fatalf("reason %q", d.Reason)
		}
	}
	// admitting again (the prolog after the resume) reserves nothing more
	if d, _ := c.Admit(ctx, need(1, "nlp", 1, 4*time.Hour), jobs); !d.Admitted {
		t.Fatal("re-admission refused")
	}
	// job 1 ended after $1.50; job 2 has $0.50 charged: $2 spent + $3.50
	// left of job 2's reservation + job 3's $4 = $9.50 fits
	sp.spent, sp.jobs = 2, map[string]float64{"1": 1.5, "2": 0.5}
	if err := c.Forget(1); err != nil {
		t.Fatal(err)
	}
	jobs[2] = job(3, "PENDING", "nlp", "ann", 1)
	jobs[2].Reason, jobs[2].AdminComment = "JobHeldAdmin", HeldPrefix+"x"
	sl := &fakeSlurm{}
	got, err := c.ReleaseHeld(ctx, jobs[1:], sl)
	if err != nil || len(got) != 1 || got[0] != 3 || len(sl.started) != 1 || !strings.HasSuffix(sl.notes[3], ": released: it fits its account's budget and limits now") {
		t.Fatalf("release %v %v %+v", got, err, sl)
	}
	// the released job's resume admits it for real
	jobs[2].State, jobs[2].Reason = "CONFIGURING", "None"
	if d, _ := c.Admit(ctx, need(3, "nlp", 1, 4*time.Hour), jobs[1:]); !d.Admitted {
		t.Fatalf("released job refused at resume: %+v", d)
	}
	// no time limit: the default (4h)
	if d, _ := c.Admit(ctx, need(9, "bio", 1, 0), nil); !d.Admitted || d.ReserveUSD != 0 {
		t.Fatalf("uncapped account: %+v", d)
	}
}

// TestUnlimitedTimeReservesTheDefault: a job without a time limit, or with
// Slurm's UNLIMITED (shown as its 365-day year), reserves the default time
// limit, not a year of its nodes.
func TestUnlimitedTimeReservesTheDefault(t *testing.T) {
	c := New(Options{Dir: t.TempDir(), Budgets: map[string]Budget{"nlp": {CapUSD: 100}}, Spend: (&spendSrc{jobs: map[string]float64{}}).fn,
		Now: (&clock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}).now})
	for i, tl := range []time.Duration{0, 365 * 24 * time.Hour, 1 << 62} {
		d, err := c.Admit(context.Background(), need(uint32(20+i), "nlp", 2, tl), nil)
		if err != nil || !d.Admitted || d.ReserveUSD != 8 {
			t.Errorf("time limit %v: %+v %v, want admitted reserving $8 (4 h x $2/h)", tl, d, err)
		}
	}
	if d, _ := c.Admit(context.Background(), need(30, "nlp", 2, 30*time.Minute), nil); d.ReserveUSD != 1 {
		t.Errorf("a 30 min job reserves $%.2f, want $1", d.ReserveUSD)
	}
}

func TestUnknownSpend(t *testing.T) {
	sp := &spendSrc{err: errors.New("sizer unreachable; state database missing")}
	for _, rule := range []string{"", "hold", "allow"} {
		c := New(Options{Dir: t.TempDir(), Budgets: map[string]Budget{"nlp": {CapUSD: 10, OnUnknown: rule}}, Spend: sp.fn})
		d, err := c.Admit(context.Background(), need(1, "nlp", 1, time.Hour), []slurm.Job{job(1, "CONFIGURING", "nlp", "ann", 1)})
		if err != nil {
			t.Fatal(err)
		}
		if want := rule == "allow"; d.Admitted != want || !d.Unknown || !strings.Contains(d.Reason, "spend of account nlp cannot be known now (sizer unreachable") {
			t.Errorf("on_unknown %q: %+v", rule, d)
		}
	}
}

// TestGPULimit: 2 GPUs for the account, four one-GPU jobs: two run, two
// wait; each job that ends releases one.
func TestGPULimit(t *testing.T) {
	clk := &clock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	c := New(Options{Dir: t.TempDir(), Limits: []Limit{{Account: "nlp", MaxGPUs: 2}}, Now: clk.now})
	ctx := context.Background()
	jobs := []slurm.Job{job(1, "CONFIGURING", "nlp", "ann", 1), job(2, "CONFIGURING", "nlp", "bob", 1), job(3, "CONFIGURING", "nlp", "ann", 1), job(4, "CONFIGURING", "nlp", "ann", 1)}
	for i, j := range jobs {
		d, _ := c.Admit(ctx, need(j.ID, "nlp", 1, time.Hour), jobs)
		if want := i < 2; d.Admitted != want {
			t.Fatalf("job %d: %+v", j.ID, d)
		}
		if i == 2 && d.Reason != HeldPrefix+"account nlp holds 2 of its 2 GPUs, this job needs 1; it starts when others end" {
			t.Fatalf("reason %q", d.Reason)
		}
	}
	held := func(j slurm.Job) slurm.Job {
		j.State, j.Nodes, j.Reason, j.AdminComment = "PENDING", "", "JobHeldAdmin", HeldPrefix+"..."
		return j
	}
	jobs[2], jobs[3] = held(jobs[2]), held(jobs[3])
	sl := &fakeSlurm{}
	if got, _ := c.ReleaseHeld(ctx, jobs, sl); len(got) != 0 {
		t.Fatalf("released %v while the limit is full", got)
	}
	// job 1 ends: Slurm no longer runs it; after the grace period its entry goes
	jobs[0].State = "COMPLETED"
	clk.add(2 * time.Minute)
	got, _ := c.ReleaseHeld(ctx, jobs, sl)
	if len(got) != 1 || got[0] != 3 {
		t.Fatalf("released %v, want [3]", got)
	}
	// a job running on a burst node that never went through admission counts
	c2 := New(Options{Dir: t.TempDir(), Limits: []Limit{{User: "bob", MaxNodes: 1}}})
	if d, _ := c2.Admit(ctx, Need{JobID: 8, Account: "x", User: "bob", GPUs: 1, Nodes: 1}, []slurm.Job{job(7, "RUNNING", "y", "bob", 1)}); d.Admitted {
		t.Fatalf("the user's running job was not counted: %+v", d)
	}
	// a job larger than the limit says it can never run as is
	if d, _ := c2.Admit(ctx, Need{JobID: 9, Account: "x", User: "bob", GPUs: 2, Nodes: 2}, nil); d.Admitted || !strings.Contains(d.Reason, "it cannot run until the limit is raised") {
		t.Fatalf("oversized job: %+v", d)
	}
}

// TestConcurrentAdmissions: twenty resumes at once for an account whose
// cap fits three reservations admit exactly three.
func TestConcurrentAdmissions(t *testing.T) {
	dir := t.TempDir()
	sp := &spendSrc{}
	var jobs []slurm.Job
	for id := uint32(1); id <= 20; id++ {
		jobs = append(jobs, job(id, "CONFIGURING", "nlp", "ann", 1))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := New(Options{Dir: dir, Budgets: map[string]Budget{"nlp": {CapUSD: 3.5}}, Spend: sp.fn}) // one per process
			d, err := c.Admit(context.Background(), need(j.ID, "nlp", 1, time.Hour), jobs)
			if err != nil {
				t.Error(err)
			}
			if d.Admitted {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 3 {
		t.Fatalf("%d admitted, want 3", admitted)
	}
}

func FuzzAdmissionsFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"entries":[{"job_id":1,"account":"nlp","state":"admitted","reserve_usd":5,"at":"2026-03-10T12:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"entries":[{"job_id":0,"state":"bogus"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, e := range decode(data) {
			if e.JobID == 0 || e.State != StateAdmitted && e.State != StateHeld && e.State != StateReleased {
				t.Fatalf("decoded a bad entry %+v", e)
			}
		}
	})
}
