package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/cmdline"
	"github.com/burst-hpc/burst/internal/cmdline/cmdlinetest"
	"github.com/burst-hpc/burst/internal/config"
	"github.com/burst-hpc/burst/internal/journal"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/sizer/billing"
	"github.com/burst-hpc/burst/sizer/store"
)

func TestParseSlurmTime(t *testing.T) {
	cases := map[string]time.Duration{
		"30": 30 * time.Minute, "30:15": 30*time.Minute + 15*time.Second, "2:00:00": 2 * time.Hour,
		"1-0": 24 * time.Hour, "1-2:30": 26*time.Hour + 30*time.Minute, "2-01:02:03": 49*time.Hour + 2*time.Minute + 3*time.Second,
		"UNLIMITED": 0, "unset": 0, "INFINITE": 0, "2982616-04:14:00": 0,
	}
	for in, want := range cases {
		got, err := parseSlurmTime(in)
		if err != nil || got != want {
			t.Errorf("%q: got %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"1:2:3:4", "x", "-5", "1-2:3:4:5", "1h"} {
		if _, err := parseSlurmTime(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseGPUOptions(t *testing.T) {
	gres := []struct {
		in    string
		model string
		n     int
	}{{"gpu:a100:8", "a100", 8}, {"gres:gpu:2", "", 2}, {"gres:gpu:l4:1,gres:nvme:1", "l4", 1}, {"gpu", "", 1}, {"gres/gpu:h100=4", "h100", 4}}
	for _, c := range gres {
		m, n, err := parseGresGPUs(c.in)
		if err != nil || m != c.model || n != c.n {
			t.Errorf("gres %q: %q %d %v", c.in, m, n, err)
		}
	}
	spec := []struct {
		in    string
		model string
		n     int
	}{{"4", "", 4}, {"a100:4", "a100", 4}, {"gpu:a100:4", "a100", 4}, {"gres:gpu:2", "", 2}}
	for _, c := range spec {
		m, n, err := parseGPUSpec(c.in)
		if err != nil || m != c.model || n != c.n {
			t.Errorf("gpus %q: %q %d %v", c.in, m, n, err)
		}
	}
	if _, _, err := parseGPUSpec("a100:x"); err == nil {
		t.Error("a100:x accepted")
	}
	if n, err := parseNodes("2-4"); err != nil || n != 2 {
		t.Errorf("nodes 2-4: %d %v", n, err)
	}
	if m, err := parseMemMiB("16G"); err != nil || m != 16384 {
		t.Errorf("mem 16G: %d %v", m, err)
	}
	if m, err := parseMemMiB("2048"); err != nil || m != 2048 {
		t.Errorf("mem 2048: %d %v", m, err)
	}
}

func testSettings(t *testing.T) *settings {
	cfg, err := config.Parse([]byte(config.DemoYAML), "demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return settingsFrom(cfg, catalog.Default())
}

func TestSettingsFromConfig(t *testing.T) {
	s := testSettings(t)
	if len(s.classes) != 2 || s.classes[0].Name != "l4" || s.classes[0].Partition != "gpu" || s.defaultPartition != "gpu" || s.budgets["demo"] != 100 {
		t.Fatalf("settings %+v", s)
	}
	if _, err := s.policy(); err != nil {
		t.Fatal(err)
	}
}

func TestWriteFilter(t *testing.T) {
	s := testSettings(t)
	d := sizing.Decision{Class: "l4", Constraint: "l4", Partition: "gpu", Gres: "gpu:l4:1", GPUsPerNode: 1, Nodes: 1, GPUModel: "l4", Capacity: "spot", InstanceTypes: []string{"g6.xlarge"}, Reason: "why\nnot"}
	d3 := d
	d3.Nodes = 3
	cases := []struct {
		job  sizerapi.JobRequest
		want []string
		not  []string
	}{
		{sizerapi.JobRequest{}, []string{"action=apply", "gres=gpu:l4:1", "constraint=l4\n", "message=l4: 1 node(s) x 1 l4 spot on g6.xlarge"}, []string{"partition=", "nodes="}},
		{sizerapi.JobRequest{Partition: "gpu", UserConstraint: "fast"}, []string{"constraint=fast&l4\n"}, nil},
		{sizerapi.JobRequest{UserConstraint: "a|b"}, nil, []string{"constraint="}},
		{sizerapi.JobRequest{Partition: "other"}, []string{"partition=gpu\n"}, nil},
		// the sizer scaled the job out: the filter sets the node count,
		// unless the user fixed it
		{sizerapi.JobRequest{JobName: "scaled"}, []string{"nodes=3\n"}, nil},
		{sizerapi.JobRequest{JobName: "scaled", ExplicitNodes: true, Nodes: 3}, nil, []string{"nodes="}},
	}
	for i, c := range cases {
		var b bytes.Buffer
		dec := d
		if c.job.JobName == "scaled" {
			dec = d3
		}
		if err := writeFilter(&b, s, c.job, "gres", dec, nil); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if lines[0] != FilterHeader {
			t.Errorf("%d: no header: %q", i, out)
		}
		for _, l := range lines[1:] {
			if k, _, ok := strings.Cut(l, "="); !ok || k == "" {
				t.Errorf("%d: line %q is not key=value", i, l)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%d: %q lacks %q", i, out, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(out, w) {
				t.Errorf("%d: %q has %q", i, out, w)
			}
		}
		if strings.Contains(out, "why\nnot") {
			t.Errorf("%d: newline leaked into the message", i)
		}
	}
	d.Nodes = 2
	for opt, want := range map[string]string{"gpus": "\ngpus=l4:2\n", "gpus-per-node": "\ngpus_per_node=l4:1\n"} {
		var b bytes.Buffer
		writeFilter(&b, s, sizerapi.JobRequest{}, opt, d, nil)
		if !strings.Contains(b.String(), want) || strings.Contains(b.String(), "gres=") {
			t.Errorf("%s: %q", opt, b.String())
		}
	}
	var b bytes.Buffer
	writeFilter(&b, s, sizerapi.JobRequest{}, "gres", sizing.Decision{Refused: true, RefuseMessage: "over\nbudget"}, nil)
	if b.String() != FilterHeader+"\naction=refuse\nmessage=over budget\n" {
		t.Errorf("refusal: %q", b.String())
	}
	b.Reset()
	writeFilter(&b, s, sizerapi.JobRequest{}, "gres", sizing.Decision{}, sizing.ErrNoClass)
	if !strings.Contains(b.String(), "action=refuse") {
		t.Errorf("no class: %q", b.String())
	}
	b.Reset()
	if err := writeFilter(&b, s, sizerapi.JobRequest{}, "gres", sizing.Decision{}, errors.New("boom")); err == nil || b.Len() != 0 {
		t.Errorf("other errors must print nothing and fail (filter passes the job): %q %v", b.String(), err)
	}
}

// TestRouteCommand runs the command end to end in-process (no daemon).
func TestRouteCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := strings.ReplaceAll(string(config.DemoYAML), "/tmp/burst-demo", dir)
	cfg = strings.Replace(cfg, "url: http://127.0.0.1:8472", "url: http://127.0.0.1:1", 1) // nothing listens: in-process
	p := filepath.Join(dir, "burst.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := runSizer(&out, &errb, "--config", p, "route", "--json", "--gres=gres:gpu:1", "--time=4:00:00", "--comment=burst: params=1B dataset=20GB", "--no-requeue"); code != 0 {
		t.Fatalf("exit status %d\n%s", code, errb.String())
	}
	var d sizing.Decision
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if !strings.Contains(out.String(), `"decided_by":"local"`) {
		t.Errorf("route --json does not say who decided: %s", out.String())
	}
	if d.Class == "" || d.Capacity != capacity.OnDemand || d.GPUsPerNode != 1 || len(d.InstanceTypes) == 0 || d.EstHours <= 0 || d.EstCostUSD <= 0 || d.Reason == "" {
		t.Errorf("decision %+v", d)
	}
	// the demo account is capped and no state database exists: the job is
	// not refused for it, and is told it waits for its spend at start
	out.Reset()
	if code := runSizer(&out, &errb, "--config", p, "route", "--json", "--gres=gpu:1", "--account=demo"); code != 0 {
		t.Fatalf("exit status %d\n%s", code, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil || d.Refused || !strings.Contains(d.Reason, "account demo's budget cannot be checked now") {
		t.Errorf("capped account without a spend figure: %+v %v", d, err)
	}
	out.Reset()
	if code := runSizer(&out, &errb, "--config", p, "route", "--json", "--gres=gpu:h100:8"); code != ExitNoClass {
		t.Errorf("no h100 class: exit %d (%s)", code, errb.String())
	}
	for _, bad := range []string{"--time=1:2:3:4", "--nodes=abc"} {
		if code := runSizer(&out, &errb, "--config", p, "route", bad); code != cmdline.ExitUsage {
			t.Errorf("route %s: exit %d, want 2 (usage) (%s)", bad, code, errb.String())
		}
	}
	out.Reset()
	if code := runSizer(&out, &errb, "--config", p, "route", "--gres=gpu:1"); code != 0 || !strings.Contains(out.String(), "[decided in-process: the sizer daemon did not answer") {
		t.Errorf("route says who decided: exit %d: %s", code, out.String())
	}
	if code := runSizer(&out, &errb, "--config", filepath.Join(dir, "nope.yaml"), "route"); code == 0 {
		t.Error("missing config accepted")
	}
}

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := strings.ReplaceAll(string(config.DemoYAML), "/tmp/burst-demo", dir)
	p := filepath.Join(dir, "burst.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	demo, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	// written as the demo cluster's sizer writes (its jobs are that cluster's)
	st, err := store.Open(ctx, filepath.Join(dir, "state"), store.ForCluster(demo.Cluster.Name))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	start := now.Add(-time.Hour)
	if ms := billing.MonthStart(now); start.Before(ms) {
		start = ms
	}
	for i, id := range []string{"1", "2"} {
		ev := sizerapi.InstanceEvent{InstanceID: "i-" + id, InstanceType: "g6.48xlarge", Capacity: "on-demand", Time: start,
			Job: &sizerapi.Job{JobID: id, JobName: "eval", User: "dan", Account: "demo", GPUsPerNode: 8, GPUMemoryMiB: 22888}}
		if err := st.RecordLaunch(ctx, ev, 13.35); err != nil {
			t.Fatal(err)
		}
		b := sizerapi.ReportBatch{Node: "n" + id, GPUSource: sizerapi.GPUSourceNVML, Records: []sizerapi.Record{{Seq: 1, Time: start, Kind: sizerapi.KindGPU, GPUs: []sizerapi.GPUReading{{Index: 0, UtilPercent: 80, MemoryUsedBytes: 10 << 30, MemoryTotalBytes: 22888 << 20, JobIDs: []uint32{uint32(i + 1)}}}}}}
		if _, err := st.AddBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	var out, errb bytes.Buffer
	if code := runSizer(&out, &errb, "--config", p, "report", "--local"); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "jobs named eval asked for 8 GPUs and used 1: ask for 1 and save") || !strings.Contains(out.String(), "demo") {
		t.Errorf("text report:\n%s", out.String())
	}
	out.Reset()
	if code := runSizer(&out, &errb, "--config", p, "report", "--local", "--json"); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep struct {
		Accounts []struct {
			Account   string  `json:"account"`
			BudgetUSD float64 `json:"budget_usd"`
		} `json:"accounts"`
		Advice []struct {
			SaveUSDPerMonth float64 `json:"save_usd_per_month"`
		} `json:"advice"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Accounts) != 1 || rep.Accounts[0].BudgetUSD != 100 || len(rep.Advice) != 1 || rep.Advice[0].SaveUSDPerMonth <= 0 {
		t.Errorf("json report %s: %v", out.String(), err)
	}
	// the local spend path (what burst-resume runs with the sizer down):
	// two on-demand instances at $13.35/h since start, and a launch still in
	// the journal
	out.Reset()
	if err := journal.In(filepath.Join(dir, "state"), nil).Append(journal.Entry{Kind: journal.KindLaunch, Event: &sizerapi.InstanceEvent{
		InstanceID: "i-3", InstanceType: "g6.xlarge", Account: "demo", PriceUSD: 36, Time: now.Add(-100 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	if code := runSizer(&out, &errb, "--config", p, "spend", "--local", "--json", "--account", "demo"); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var sp sizerapi.AccountSpend
	if err := json.Unmarshal(out.Bytes(), &sp); err != nil {
		t.Fatal(err)
	}
	hours := time.Since(start).Hours()
	if want := 2*13.35*hours + 1.0; sp.Source != "local" || math.Abs(sp.SpentUSD-want) > 0.1 || sp.BurnUSDPerHour != 26.7 {
		t.Errorf("local spend %+v, want about $%.2f", sp, want)
	}
	out.Reset()
	if code := runSizer(&out, &errb, "--config", p, "ledger", "--local"); code != 0 || !strings.Contains(out.String(), "i-1") || !strings.Contains(out.String(), "billed from launch") {
		t.Errorf("ledger --local: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if code := runSizer(&out, &errb, "--config", filepath.Join(dir, "burst.yaml"), "spend", "--local", "--account", "demo"); code != 0 {
		t.Errorf("text spend: exit %d", code)
	}
	os.Remove(filepath.Join(dir, "state", store.FileName))
	if code := runSizer(&out, &errb, "--config", p, "spend", "--local", "--json", "--account", "demo"); code == 0 {
		t.Error("local spend without a state database succeeded")
	}
}

// runSizer runs burst-sizer with args as main does and returns its exit status.
func runSizer(stdout, stderr *bytes.Buffer, args ...string) int {
	return cmdline.Run(context.Background(), App(stdout, stderr), append([]string{"burst-sizer"}, args...), stderr)
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	if missing := cmdlinetest.MissingEnvVars(App(io.Discard, io.Discard)); len(missing) > 0 {
		t.Fatalf("flags without an environment variable: %v", missing)
	}
}

// TestRouteRefusalExits1: a refused job is a failure for the exit status.
func TestRouteRefusalExits1(t *testing.T) {
	if err := refusal(sizing.Decision{Refused: true, RefuseMessage: "over budget"}, "daemon"); cmdline.ExitCode(err) != cmdline.ExitFailure || !strings.Contains(err.Error(), "sizer daemon") {
		t.Errorf("refusal: %v (exit %d)", err, cmdline.ExitCode(err))
	}
	if err := refusal(sizing.Decision{Class: "l4"}, "local"); err != nil {
		t.Errorf("a decision is not a refusal: %v", err)
	}
}
