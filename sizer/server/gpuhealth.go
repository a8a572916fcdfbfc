package server

import (
	"fmt"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/burst-hpc/burst/internal/gpuhealth"
	"github.com/burst-hpc/burst/internal/sizerapi"
)

// newGPUHealthMetric is burst_sizer_gpu_health_events_total: GPU health
// events agents reported, by event (the kind, or xid_<code>) and action
// (replace: the node was drained and its instance replaced; note; ignore).
// examples/prometheus-alerts.yaml fires on its replace series.
func newGPUHealthMetric() *prometheus.CounterVec {
	m := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "burst_sizer_gpu_health_events_total",
		Help: "GPU health events reported by burst-agent, by event (kind or xid_<code>) and action (replace, note, ignore)."}, []string{"event", "action"})
	// every event of the table at its default action starts at 0, so that
	// rates and alerts see the series before the first fault
	for k, a := range gpuhealth.KindTable {
		m.WithLabelValues(string(k), string(a))
	}
	for _, x := range gpuhealth.Xids() {
		m.WithLabelValues(fmt.Sprintf("xid_%d", x), string(gpuhealth.XidTable[x].Action))
	}
	return m
}

// gpuHealthLabel is the metric's event label of h (bounded: the kinds and
// Xid codes 1..999).
func gpuHealthLabel(h *sizerapi.GPUHealth) string {
	if h.Kind == string(gpuhealth.KindXid) {
		return fmt.Sprintf("xid_%d", h.Xid)
	}
	return h.Kind
}

// healthProblem says why a gpu_health record is malformed, or "".
func healthProblem(h *sizerapi.GPUHealth) string {
	if h == nil {
		return "kind gpu_health without its health field"
	}
	if h.Kind != string(gpuhealth.KindXid) {
		if _, err := gpuhealth.ParseKind(h.Kind); err != nil {
			return err.Error()
		}
	} else if h.Xid < 1 || h.Xid > 999 {
		return fmt.Sprintf("Xid %d: want 1..999", h.Xid)
	}
	if _, err := gpuhealth.ParseAction(h.Action); err != nil {
		return err.Error()
	}
	if h.GPU < -1 || h.GPU > 63 {
		return fmt.Sprintf("gpu %d: want -1..63", h.GPU)
	}
	for name, v := range map[string]string{"uuid": h.UUID, "bus_id": h.BusID, "detail": h.Detail, "reason": h.Reason} {
		if len(v) > 200 || !utf8.ValidString(v) {
			return fmt.Sprintf("%s longer than 200 bytes or not UTF-8", name)
		}
	}
	if len(h.Jobs) > 64 {
		return fmt.Sprintf("%d jobs: at most 64", len(h.Jobs))
	}
	return ""
}
