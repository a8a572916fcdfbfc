package e2e

import (
	"math"
	"testing"
	"time"

	"github.com/burst-hpc/burst/sizer/ui/uitest"
)

// checkJobWaits: every job of submits shows its wait on the Jobs page
// (the figures equal the API's: check), from Slurm's own submit time (the
// requeued job's last attempt's), its parts adding up to it; the jobs
// that started on a node launched for them (fresh) waited for its boot and
// its registration, from the node's boot report.
func checkJobWaits(t *testing.T, rows map[string]map[string]any, figs []uitest.Figure, submits map[string]time.Time, fresh ...string) {
	t.Helper()
	for id, sub := range submits {
		w, _ := rows[id]["wait"].(map[string]any)
		if w == nil {
			t.Errorf("job %s shows no wait: %v", id, rows[id])
			continue
		}
		got, err1 := time.Parse(time.RFC3339Nano, w["submitted"].(string))
		started, err2 := time.Parse(time.RFC3339Nano, w["started"].(string))
		if err1 != nil || err2 != nil || !got.Equal(sub) || !started.After(got) {
			t.Errorf("job %s waited from %v to %v; Slurm says it was submitted at %v", id, w["submitted"], w["started"], sub)
			continue
		}
		total, queue, boot, reg := w["total_s"].(float64), w["queue_s"].(float64), w["boot_s"].(float64), w["registration_s"].(float64)
		if math.Abs(total-started.Sub(got).Seconds()) > 0.002 || math.Abs(queue+boot+reg-total) > 0.01 || queue < 0 || boot < 0 || reg < 0 {
			t.Errorf("job %s's wait %v: the parts do not add up to submit-to-start (%.3f s)", id, w, started.Sub(got).Seconds())
		}
		t.Logf("job %s waited %.1f s: queue %.1f, boot %.1f, registration %.1f (node %v, boot report %v)", id, total, queue, boot, reg, w["node"], w["boot_report"])
	}
	for _, id := range fresh {
		if w, _ := rows[id]["wait"].(map[string]any); w != nil && (w["boot_report"] != true || w["node"] == nil || !(w["boot_s"].(float64) > 0) || !(w["registration_s"].(float64) > 0)) {
			t.Errorf("job %s started on a node launched for it, yet its wait shows no boot or registration: %v", id, w)
		}
	}
	if n := uitest.Count(figs, `^jobs/\d+/wait/total_s$`); n < len(submits) {
		t.Errorf("the Jobs page shows %d waits; want at least %d", n, len(submits))
	}
}

// checkClassWaits: the Fleet view's waits per class: the two l4x4 jobs of
// the day, and at least one a10g job (the training job, the long job),
// with their median and 95th percentile on the page.
func checkClassWaits(t *testing.T, v map[string]any, figs []uitest.Figure) {
	t.Helper()
	byClass := map[string]map[string]any{}
	for _, c := range v["classes"].([]any) {
		cm := c.(map[string]any)
		byClass[cm["class"].(string)], _ = cm["waits"].(map[string]any)
	}
	w := byClass["l4x4"]
	if w == nil || w["jobs"] != 2.0 || !(w["p50_s"].(float64) > 0) || w["p95_s"].(float64) < w["p50_s"].(float64) {
		t.Errorf("class l4x4's waits %v: want the 2 nightly-eval jobs, a median above 0 and a 95th percentile at least the median", w)
	}
	if w := byClass["a10g"]; w == nil || w["jobs"].(float64) < 1 {
		t.Errorf("class a10g's waits %v: want at least the training job", w)
	}
	if n := uitest.Count(figs, `^classes/\d+/waits/p(50|95)_s$`); n < 4 {
		t.Errorf("the Fleet page shows %d wait percentiles; want at least 4 (2 classes)", n)
	}
}
