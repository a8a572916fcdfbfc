package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/burst-hpc/burst/internal/auth"
	"github.com/burst-hpc/burst/internal/breaker"
	"github.com/burst-hpc/burst/internal/cloud"
	"github.com/burst-hpc/burst/internal/cloud/cloudfake"
	"github.com/burst-hpc/burst/internal/ec2events"
	"github.com/burst-hpc/burst/internal/notices"
	"github.com/burst-hpc/burst/internal/reconcile"
	"github.com/burst-hpc/burst/internal/sizerapi"
	"github.com/burst-hpc/burst/internal/sizing"
	"github.com/burst-hpc/burst/internal/slurm"
	"github.com/burst-hpc/burst/internal/slurm/slurmfake"
	"github.com/burst-hpc/burst/sizer/server"
)

// scrapeDaemon builds the metrics burst-sizer serve registers (the server,
// the launch breaker's collector, the reconciler), drives each once (a
// launch and a report for a capped account, an interruption, two launch
// failures, an orphan whose termination fails) and scrapes /metrics.
func scrapeDaemon(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	tok, _ := auth.Generate()
	log := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	classes := []sizing.Class{{Name: "l4", GPUModel: "l4", GPUsPerNode: 1, MaxNodes: 2, InstanceTypes: []string{"g6.xlarge"}}}
	srv, err := server.New(ctx, server.Options{Token: tok, StateDir: dir, Budgets: map[string]float64{"demo": 10}, Classes: classes, Region: "us-east-1",
		Zones: []string{"us-east-1a"}, Logger: log, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	registerBreakerMetrics(reg, dir, log)
	b := breaker.New(breaker.Options{Dir: dir})
	b.Failure("l4", "InsufficientInstanceCapacity")
	b.Failure("l4", "InsufficientInstanceCapacity")
	fc := cloudfake.New("demo")
	fc.Add(cloud.Instance{ID: "i-orphan", Node: "l4-2", State: "running", LaunchTime: time.Now().Add(-time.Hour)})
	fc.TerminateErr = errors.New("UnauthorizedOperation") // the action and its failure both counted
	fs := slurmfake.New(nil, []slurm.Node{{Name: "l4-2", State: "IDLE", Flags: []string{"CLOUD", "POWERED_DOWN"}}})
	rec, err := reconcile.New(fc, fs, reconcile.Options{Grace: time.Minute, Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if rep, _ := rec.RunOnce(ctx); len(rep.Results) != 1 || rep.Results[0].Reason != reconcile.ReasonOrphan {
		t.Fatalf("the reconciler pass: %+v", rep)
	}
	readInterruptionQueue(t, reg, fs)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	post := func(path, cred string, body any) {
		t.Helper()
		js, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", hs.URL+path, bytes.NewReader(js))
		req.Header.Set("Authorization", "Bearer "+cred)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("POST %s: %v %s", path, err, b)
		}
		resp.Body.Close()
	}
	post(sizerapi.PathInstanceLaunch, tok, sizerapi.InstanceEvent{InstanceID: "i-1", Node: "l4-1", InstanceType: "g6.xlarge", Zone: "us-east-1a", Capacity: "spot", Account: "demo",
		Time: time.Now().Add(-time.Hour), Job: &sizerapi.Job{JobID: "7", JobName: "ft", User: "ann", Account: "demo", GPUsPerNode: 1}})
	post(sizerapi.PathReports, tok, sizerapi.ReportBatch{Node: "l4-1", Records: []sizerapi.Record{{Seq: 1, Time: time.Now(), Kind: sizerapi.KindGPU,
		GPUs: []sizerapi.GPUReading{{Index: 0, UtilPercent: 50, MemoryUsedBytes: 1 << 30, MemoryTotalBytes: 24 << 30, JobIDs: []uint32{7}}}}}})
	post(sizerapi.PathInterruptions, tok, sizerapi.Interruption{InstanceID: "i-1", Node: "l4-1", Action: "terminate", Time: time.Now()})
	post(sizerapi.PathBoots, tok, sizerapi.BootReport{Node: "l4-1", Started: time.Now(), OK: true,
		Phases: []sizerapi.BootPhase{{Name: sizerapi.PhaseEC2, Seconds: 1}, {Name: sizerapi.PhaseTotal, Seconds: 2}}})
	post(sizerapi.PathRank, tok, sizerapi.RankRequest{Class: "l4", Job: sizerapi.JobRequest{JobID: "8", Account: "demo", GPUsPerNode: 1}})
	req, _ := http.NewRequest("GET", hs.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+auth.ReadOnlyToken(tok))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %v %v", err, resp)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for name, f := range fams {
		out[name] = f
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				out[name+suf] = f
			}
		}
	}
	return out
}

// labelValues are the values each label takes on a family's series (and
// "le" for histograms).
func labelValues(f *dto.MetricFamily) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	if f.GetType() == dto.MetricType_HISTOGRAM {
		out["le"] = map[string]bool{}
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if out[l.GetName()] == nil {
				out[l.GetName()] = map[string]bool{}
			}
			out[l.GetName()][l.GetValue()] = true
		}
	}
	return out
}

var (
	selectorRe = regexp.MustCompile(`\b(burst_[a-z0-9_]+)\b(\{([^}]*)\})?`)
	matcherRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	byRe       = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// checkExpr says what in a PromQL expression does not exist in the scrape:
// a burst_ metric, a label of a selector, an exact label value, or a
// grouping label none of its metrics has.
func checkExpr(expr string, fams map[string]*dto.MetricFamily) []string {
	var bad []string
	sels := selectorRe.FindAllStringSubmatch(expr, -1)
	if len(sels) == 0 {
		bad = append(bad, "names no burst_ metric")
	}
	labels := map[string]bool{}
	for _, m := range sels {
		f, ok := fams[m[1]]
		if !ok {
			bad = append(bad, "metric "+m[1]+" is not registered by burst-sizer")
			continue
		}
		lv := labelValues(f)
		for l := range lv {
			labels[l] = true
		}
		for _, mm := range matcherRe.FindAllStringSubmatch(m[3], -1) {
			vals, ok := lv[mm[1]]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s has no label %s", m[1], mm[1]))
			case mm[2] == "=" && !vals[mm[3]]:
				bad = append(bad, fmt.Sprintf("%s{%s} never takes the value %q (it takes %v)", m[1], mm[1], mm[3], keys(vals)))
			case mm[2] == "=~":
				for _, alt := range strings.Split(mm[3], "|") {
					if !vals[alt] && !knownValue(m[1], mm[1], alt) {
						bad = append(bad, fmt.Sprintf("%s{%s} never takes the value %q", m[1], mm[1], alt))
					}
				}
			}
		}
	}
	for _, g := range byRe.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !labels[l] {
				bad = append(bad, fmt.Sprintf("groups by %s, a label none of its metrics has", l))
			}
		}
	}
	return bad
}

// knownValue: label values the scrape did not produce but the code does
// (the reconciler's reasons: internal/reconcile's constants; the
// interruption queue's kinds and outcomes: internal/notices's).
func knownValue(metric, label, v string) bool {
	if metric == "burst_sizer_ec2_events_total" {
		switch label {
		case "outcome":
			return slices.Contains(notices.Outcomes, v)
		case "kind":
			return slices.Contains([]string{string(ec2events.SpotInterruption), string(ec2events.Rebalance), string(ec2events.StateChange), notices.KindInvalid}, v)
		}
	}
	if strings.HasPrefix(metric, "burst_reconcile_action") && label == "reason" {
		for _, r := range []reconcile.Reason{reconcile.ReasonOrphan, reconcile.ReasonNoNode, reconcile.ReasonDuplicate, reconcile.ReasonInstanceGone, reconcile.ReasonStopped, reconcile.ReasonResumeTimeout} {
			if string(r) == v {
				return true
			}
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestAlertRulesUseRealMetrics: every alert rule of
// examples/prometheus/burst-alerts.yaml names metrics, labels and label
// values a running burst-sizer exports, and the rules cover launch
// failures, the breaker, orphans, budgets at 80% and 100%, interruptions
// and a stale agent.
func TestAlertRulesUseRealMetrics(t *testing.T) {
	fams := scrapeDaemon(t)
	raw, err := os.ReadFile("../../examples/prometheus/burst-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("burst-alerts.yaml: %v", err)
	}
	seen := map[string]string{}
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			seen[r.Alert] = r.Expr
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: needs alert, expr, labels.severity and annotations.summary", r)
			}
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
			}
			if strings.HasPrefix(r.Expr, "up{") { // Prometheus's own scrape metric
				continue
			}
			for _, bad := range checkExpr(r.Expr, fams) {
				t.Errorf("rule %s (%s): %s", r.Alert, r.Expr, bad)
			}
		}
	}
	for _, want := range []struct{ alert, metric string }{
		{"BurstLaunchFailures", "burst_launch_failures_total"}, {"BurstLaunchBreakerOpen", "burst_launch_breaker_open"},
		{"BurstOrphanInstances", `reason=~"orphan`}, {"BurstBudget80Percent", ">= 0.8"}, {"BurstBudgetReached", "burst_sizer_account_over_budget == 1"},
		{"BurstSpotInterruptions", "burst_sizer_interruptions_total"}, {"BurstStaleAgent", "burst_sizer_node_last_report_timestamp_seconds"},
		{"BurstGPUFault", "burst_sizer_gpu_health_events_total"},
	} {
		if !strings.Contains(seen[want.alert], want.metric) {
			t.Errorf("no alert %s on %s (rules: %v)", want.alert, want.metric, keysOf(seen))
		}
	}
}

// TestGrafanaDashboardUsesRealMetrics: every panel query of
// examples/grafana/burst-dashboard.json names metrics and labels a running
// burst-sizer exports.
func TestGrafanaDashboardUsesRealMetrics(t *testing.T) {
	fams := scrapeDaemon(t)
	raw, err := os.ReadFile("../../examples/grafana/burst-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("burst-dashboard.json: %v", err)
	}
	if d.Title == "" || d.UID == "" || len(d.Panels) < 8 {
		t.Fatalf("dashboard %q (%s) has %d panels", d.Title, d.UID, len(d.Panels))
	}
	used := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, bad := range checkExpr(tg.Expr, fams) {
				t.Errorf("panel %q (%s): %s", p.Title, tg.Expr, bad)
			}
			for _, m := range selectorRe.FindAllStringSubmatch(tg.Expr, -1) {
				used[m[1]] = true
			}
		}
	}
	for _, must := range []string{"burst_launch_failures_total", "burst_launch_breaker_open", "burst_reconcile_actions_total", "burst_sizer_account_spend_usd",
		"burst_sizer_interruptions_total", "burst_sizer_node_last_report_timestamp_seconds"} {
		if !used[must] {
			t.Errorf("no panel shows %s", must)
		}
	}
}

// TestCheckExprCatchesMistakes: the check itself refuses a wrong name, a
// wrong label and a value the metric never takes.
func TestCheckExprCatchesMistakes(t *testing.T) {
	fams := scrapeDaemon(t)
	for _, e := range []string{`burst_launch_failure_total > 0`, `burst_launch_breaker_open{klass="l4"}`, `burst_reconcile_actions_total{action="explode"}`,
		`sum by (zone) (burst_sizer_live_instances)`, `burst_reconcile_actions_total{reason=~"orphan|typo"}`, `rate(x[5m])`} {
		if len(checkExpr(e, fams)) == 0 {
			t.Errorf("%s passed the check", e)
		}
	}
	if bad := checkExpr(`sum by (class) (increase(burst_launch_failures_total{class="l4"}[5m]))`, fams); len(bad) != 0 {
		t.Errorf("a good expression refused: %v", bad)
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
