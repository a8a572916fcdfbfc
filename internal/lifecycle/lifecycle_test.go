package lifecycle

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/bootstrap"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/config/configtest"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizerclient"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
	"github.com/burst-hpc/burst/internal/userdata"
)

func demoConfig(t *testing.T) *config.Config { return configtest.Demo(t) }

// TestUserDataRoundTrip: what burst-resume writes is what the node
// bootstrap reads, for a single node and for a multi-node fleet document;
// neither carries a credential.
func TestUserDataRoundTrip(t *testing.T) {
	cfg := demoConfig(t)
	issued := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	one, err := RenderUserData(cfg, []cloud.NodeSpec{{Node: "l4-1"}}, issued)
	if err != nil {
		t.Fatal(err)
	}
	u, err := userdata.Decode([]byte(one))
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(cfg.Sizer.TLS.CAFile)
	if u.NodeName != "l4-1" || !u.IssuedAt.Equal(issued) || u.FSx.MountPoint != cfg.FSx.MountPoint || u.Agent.SizerCA != string(ca) ||
		u.Agent.SizerURL != cfg.Sizer.URL || u.Agent.LogLevel != cfg.Log.Level || u.Test == nil || u.Test.LocalFSDir != cfg.FSx.LocalDir {
		t.Fatalf("single-node document: %+v", u)
	}
	if args := bootstrap.SlurmdArgs(u); !strings.Contains(strings.Join(args, " "), "-N l4-1") {
		t.Fatalf("slurmd args %v", args)
	}
	fleet, err := RenderUserData(cfg, []cloud.NodeSpec{{Node: "l4-1"}, {Node: "l4-2"}}, issued)
	if err != nil {
		t.Fatal(err)
	}
	f, err := userdata.Decode([]byte(fleet))
	if err != nil {
		t.Fatal(err)
	}
	if f.NodeName != "" {
		t.Fatalf("a fleet document names node %q", f.NodeName)
	}
	for _, doc := range []string{one, fleet} {
		for _, secret := range []string{"credential", "bn1:", "bn2:", "token", "PRIVATE"} {
			if strings.Contains(doc, secret) {
				t.Errorf("user data holds %q:\n%s", secret, doc)
			}
		}
	}
}

func TestKeepFor(t *testing.T) {
	cfg := demoConfig(t)
	r := &Releaser{Cfg: cfg}
	gres := func(s string) []slurm.GRES { g, _ := slurm.ParseGRES(s); return g }
	jobs := []slurm.Job{
		{ID: 1, State: "RUNNING", Nodes: "l4-1"},
		{ID: 2, State: "PENDING", Reason: "JobHeldAdmin"},
		{ID: 4, State: "PENDING", Reason: "Resources", GRESPerNode: gres("gpu:a10g:1")},
		{ID: 5, State: "PENDING", Reason: "Resources", GRESPerNode: gres("gpu:2")},
		{ID: 6, State: "PENDING", Reason: "Priority", Features: "a10g"},
		{ID: 9, State: "PENDING", Reason: "Priority", Features: "l"}, // not a substring match of l4
		{ID: 3, State: "PENDING", Reason: "Resources", NodeCount: 2, Features: "l4"},
		{ID: 7, State: "PENDING", Reason: "Resources", GRESPerNode: gres("gpu:l4:1")},
		{ID: 8, State: "PENDING", Reason: "Resources"},
	}
	// three l4 nodes and an a10g node end with job 1: the two-node job 3
	// takes two l4 nodes, job 7 the third; job 4 (gpu:a10g) the a10g node
	kept, released, waiting := r.keepFor(jobs, 1, []string{"l4-1", "l4-2", "l4-3", "a10g-1"})
	if strings.Join(kept, ",") != "l4-1,l4-2,l4-3,a10g-1" || len(released) != 0 || fmt.Sprint(waiting) != "[3 7 4]" {
		t.Fatalf("kept %v released %v waiting %v", kept, released, waiting)
	}
	// one l4 node: the first fitting job, which asks for two, gets it
	kept, released, waiting = r.keepFor(jobs, 1, []string{"l4-2"})
	if fmt.Sprint(kept, released, waiting) != "[l4-2] [] [3]" {
		t.Fatalf("kept %v released %v waiting %v", kept, released, waiting)
	}
	// no fitting job: released
	kept, released, _ = r.keepFor(jobs[:6], 1, []string{"l4-2"})
	if len(kept) != 0 || fmt.Sprint(released) != "[l4-2]" {
		t.Fatalf("kept %v released %v", kept, released)
	}
}

func TestTruncReason(t *testing.T) {
	if got := truncReason("burst: a\nb\tc"); got != "burst: a b c" {
		t.Fatalf("control characters kept: %q", got)
	}
	if got := truncReason(strings.Repeat("x", 300)); len(got) != 120 || !strings.HasSuffix(got, "...") {
		t.Fatalf("not cut to 120 bytes: %d", len(got))
	}
}

func TestJobRequest(t *testing.T) {
	cfg := demoConfig(t)
	a10g, _ := cfg.Class("a10g")
	g, _ := slurm.ParseGRES("gpu:a10g:1")
	jr := jobRequest(group{jobID: 9, class: a10g, nodes: []string{"a10g-1"}, job: &slurm.Job{ID: 9, Name: "train", User: "ada",
		Account: "nlp", Comment: "burst: params=1B", Requeue: false, GRESPerNode: g, CPUs: 8, NodeCount: 1, MemoryPerNodeMB: 4096, TimeLimit: time.Hour}})
	if jr.JobID != "9" || jr.GPUsPerNode != 1 || !jr.NoRequeue || jr.CPUsPerNode != 8 || jr.MemoryMiBPerNode != 4096 || jr.TimeLimitSeconds != 3600 || jr.Account != "nlp" {
		t.Fatalf("%+v", jr)
	}
	manual := jobRequest(group{class: a10g, nodes: []string{"a10g-2"}})
	if manual.JobID != "" || manual.GPUsPerNode != a10g.GPUsPerNode {
		t.Fatalf("manual power-up request %+v", manual)
	}
}

// TestJournalRecorder: with the sizer unreachable, events go to a 0600
// journal in order, and nothing is lost.
func TestJournalRecorder(t *testing.T) {
	dir := t.TempDir()
	j := &JournalRecorder{Dir: dir}
	ctx := context.Background()
	if err := j.Launched(ctx, sizerapi.InstanceEvent{InstanceID: "i-1", InstanceType: "g6.xlarge", Account: "nlp", Time: time.Unix(100, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := j.Terminated(ctx, "i-1", time.Unix(200, 0)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "instance-events.jsonl"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("journal: %v %v", fi, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "instance-events.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"kind":"launch"`) || !strings.Contains(lines[1], `"kind":"terminate"`) {
		t.Fatalf("journal content:\n%s", b)
	}
	if n, err := j.Flush(ctx); n != 0 || err != nil {
		t.Fatalf("flush without a sizer: %d %v", n, err)
	}
}

// TestReleaseKeepsHandBackReason: a node already on its way down keeps the
// reason a failed resume gave it; an up node is powered down at once.
func TestReleaseKeepsHandBackReason(t *testing.T) {
	cfg := demoConfig(t)
	cfg.Teardown.WarmReuse = config.D(0)
	sl := slurmfake.New(nil, []slurm.Node{{Name: "l4-1", State: "IDLE", Flags: []string{"CLOUD", "POWER_DOWN"}}, {Name: "l4-2", State: "IDLE"}})
	r := &Releaser{Cfg: cfg, Slurm: sl}
	_, released, err := r.Release(context.Background(), 5, "l4-[1-2]")
	if err != nil {
		t.Fatal(err)
	}
	if ups := sl.Updates(); len(released) != 1 || released[0] != "l4-2" || len(ups) != 1 || ups[0].State != "POWER_DOWN_ASAP" {
		t.Fatalf("released %v updates %+v", released, ups)
	}
}

// TestWaitingJobsReadsOnlyCandidates: warm reuse lists pending jobs' states
// and reads in full only those that could take a node now (multi-node jobs
// too: they may take several), in squeue's order.
func TestWaitingJobsReadsOnlyCandidates(t *testing.T) {
	var held []slurm.Job
	for id := uint32(1); id <= 1000; id++ {
		held = append(held, slurm.Job{ID: id, State: "PENDING", Reason: "JobHeldUser", NodeCount: 1})
	}
	sl := slurmfake.New(append(slices.Clone(held),
		slurm.Job{ID: 2001, State: "PENDING", Reason: "BeginTime", NodeCount: 1},
		slurm.Job{ID: 2002, State: "PENDING", Reason: "Resources", NodeCount: 2},
		slurm.Job{ID: 2003, State: "PENDING", Reason: "Priority", NodeCount: 1},
		slurm.Job{ID: 2004, State: "RUNNING", Reason: "None", NodeCount: 1, Nodes: "l4-2"},
		slurm.Job{ID: 2005, State: "PENDING", Reason: "Resources", NodeCount: 1},
		slurm.Job{ID: 2006, State: "PENDING", Reason: "None", NodeCount: 1}, // the job that ended: skipped
	), nil)
	jobs, err := waitingJobs(context.Background(), sl, 2006)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 3 || jobs[0].ID != 2002 || jobs[1].ID != 2003 || jobs[2].ID != 2005 {
		t.Errorf("waiting jobs %+v, want 2002, 2003, 2005", jobs)
	}
	if r := sl.JobReads(); len(r) != 1 || !slices.Equal(r[0], []uint32{2002, 2003, 2005}) {
		t.Errorf("Jobs calls %v, want one for 2002, 2003 and 2005", r)
	}
	sl = slurmfake.New(held, nil)
	if jobs, err := waitingJobs(context.Background(), sl, 1); err != nil || len(jobs) != 0 || len(sl.JobReads()) != 0 {
		t.Errorf("only held jobs: %+v %v, Jobs calls %v", jobs, err, sl.JobReads())
	}
	// the scan reads at most maxWarmScan states, the highest priority
	// first: a waiting job past them is not seen, however long the queue
	var begin []slurm.Job
	for id := uint32(1); id <= maxWarmScan; id++ {
		begin = append(begin, slurm.Job{ID: id, State: "PENDING", Reason: "BeginTime", NodeCount: 1})
	}
	sl = slurmfake.New(append(begin, slurm.Job{ID: 5000, State: "PENDING", Reason: "Priority", NodeCount: 1}), nil)
	if jobs, err := waitingJobs(context.Background(), sl, 1); err != nil || len(jobs) != 0 {
		t.Errorf("a waiting job past the first %d: %+v %v, want none read", maxWarmScan, jobs, err)
	}
}

func TestWaitNodesStopsWhenJobRequeued(t *testing.T) {
	sl := slurmfake.New([]slurm.Job{{ID: 3, State: "PENDING"}}, []slurm.Node{{Name: "l4-1", State: "IDLE", Flags: []string{"CLOUD", "POWERING_UP"}}})
	ready, err := WaitNodes(context.Background(), sl, 3, "l4-1", 10*time.Second, time.Millisecond, nil)
	if ready || err != nil {
		t.Fatalf("ready %v err %v", ready, err)
	}
	sl.SetJobs(slurm.Job{ID: 3, State: "CONFIGURING"})
	sl.SetNodes(slurm.Node{Name: "l4-1", State: "IDLE", Flags: []string{"CLOUD"}})
	if ready, err := WaitNodes(context.Background(), sl, 3, "l4-1", 10*time.Second, time.Millisecond, nil); !ready || err != nil {
		t.Fatalf("registered node: ready %v err %v", ready, err)
	}
	if _, err := WaitNodes(context.Background(), sl, 3, "l4-[", time.Second, time.Millisecond, nil); err == nil {
		t.Fatal("bad node list accepted")
	}
}

// TestJournalReplay: the replay sends the journal in order, stops at the
// first refusal and keeps the rest; a later replay sends what is left.
func TestJournalReplay(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	down := &JournalRecorder{Dir: dir}
	for i := 1; i <= 3; i++ {
		if err := down.Launched(ctx, sizerapi.InstanceEvent{InstanceID: fmt.Sprintf("i-%d", i), InstanceType: "g6.xlarge", Time: time.Unix(int64(i), 0)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	accept := 2
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev sizerapi.InstanceEvent
		json.NewDecoder(r.Body).Decode(&ev)
		if len(got) >= accept {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		got = append(got, r.URL.Path+" "+ev.InstanceID)
	}))
	defer srv.Close()
	sc, err := sizerclient.New(srv.URL, "admin", sizerclient.WithCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	if err != nil {
		t.Fatal(err)
	}
	up := &JournalRecorder{Dir: dir, Sizer: sc}
	if n, err := up.Flush(ctx); n != 2 || err != nil {
		t.Fatalf("first replay: sent %d, %v", n, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "instance-events.jsonl"))
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"i-3"`) {
		t.Fatalf("journal after a partial replay:\n%s", b)
	}
	accept = 3
	if n, err := up.Flush(ctx); n != 1 || err != nil {
		t.Fatalf("second replay: sent %d, %v", n, err)
	}
	if want := []string{"/v1/instances/launch i-1", "/v1/instances/launch i-2", "/v1/instances/launch i-3"}; !slices.Equal(got, want) {
		t.Fatalf("sizer got %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "instance-events.jsonl")); len(b) != 0 {
		t.Fatalf("journal not emptied:\n%s", b)
	}
}
