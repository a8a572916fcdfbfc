package sizing

import (
	"fmt"
	"strings"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/jobmeta"
)

// decisionReason says why the decision: the job's need, the plan, its
// run time, its capacity and the choice among the classes.
func decisionReason(r Request, n need, res searchResult, tg targets) string {
	pl := res.best
	c := pl.class
	var parts []string
	if m := n.model; m != nil {
		s := fmt.Sprintf("%s-param %s", fmtCount(m.Params), n.workload)
		if m.Training() {
			s += " (" + string(m.Method)
			if m.Precision != "" {
				s += ", " + string(m.Precision)
			}
			s += ")"
		} else if m.Precision != "" {
			s += " " + string(m.Precision)
		}
		if pl.mem != nil && !pl.learnedMem {
			s += " needs " + pl.mem.String()
		} else if pl.learnedMem {
			s += fmt.Sprintf(" sized from measured use: %.1f GiB per GPU", pl.needMiB/1024)
		}
		parts = append(parts, s)
		if n.note != "" {
			parts = append(parts, n.note)
		}
		if m.ArchNote != "" && pl.mem != nil && (pl.mem.Activations > 0 || pl.mem.KVCache > 0) {
			parts = append(parts, m.ArchNote)
		}
	} else if pl.needMiB > 0 {
		parts = append(parts, fmt.Sprintf("sized from measured use: %.1f GiB per GPU", pl.needMiB/1024))
	} else if r.GPUsPerNode > 0 {
		parts = append(parts, fmt.Sprintf("no model size given: sized for %d GPU(s) per node", r.GPUsPerNode))
	}
	parts = append(parts, fmt.Sprintf("%s (%d x %s per node, %.0f GiB usable per GPU) on %s %s at $%.2f/h", planName(pl), pl.gpn, c.GPUModel, pl.usableMiB/1024, pl.best.InstanceType, pl.best.Capacity, pl.hourly))
	if n.flops > 0 && pl.hours > 0 {
		pf := PerfOf(c.GPUModel)
		s := fmt.Sprintf("%.2g FLOPs at %.0f%% of %.0f TFLOPS (MFU for %s params) x %d GPUs", n.flops, pf.MFUAt(n.model.Params)*100, pf.PeakTFLOPS, fmtCount(n.model.Params), pl.gpus())
		if pl.netNote != "" {
			s += " x " + pl.netNote
		} else if _, note := Efficiency(pl.fabric, pl.nodes, pl.gpn, n.model.CommVolume(pl.sharding)); note != "" {
			s += " x " + note
		}
		parts = append(parts, fmt.Sprintf("%s = %.1f h", s, pl.hours))
	} else if pl.decode != nil {
		s := pl.decode.String()
		if n.tokens > 0 {
			s += fmt.Sprintf(": %s tokens in %.1f h", fmtCount(n.tokens), pl.hours)
		}
		parts = append(parts, s)
	} else if pl.hours > 0 {
		parts = append(parts, fmt.Sprintf("run time taken from --time (%.1f h)", pl.hours))
	}
	if pl.netNote != "" && (n.flops == 0 || pl.hours == 0) {
		parts = append(parts, pl.netNote) // not in the run time above
	}
	if pl.best.Capacity == capacity.Spot {
		parts = append(parts, pl.best.Reason)
	} else if pl.why != "" {
		parts = append(parts, "on-demand because "+pl.why)
	}
	parts = append(parts, choiceText(r, tg, res))
	return strings.Join(parts, "; ")
}

// choiceText says why this plan won.
func choiceText(r Request, tg targets, res searchResult) string {
	pl := res.best
	var s string
	switch {
	case tg.any() && res.meeting == 0:
		s = fmt.Sprintf("no plan meets %s; the fastest of %d fitting classes", targetText(r.Metadata), res.fitting)
	case tg.any():
		s = fmt.Sprintf("cheapest of %d classes whose plans meet %s (%d fit)", res.meeting, targetText(r.Metadata), res.fitting)
	case pl.cost > 0:
		s = fmt.Sprintf("cheapest expected cost of %d fitting classes", res.fitting)
	case pl.work > 0:
		s = fmt.Sprintf("cheapest expected price per unit of work (hourly price / effective TFLOPS) of %d fitting classes", res.fitting)
	default:
		s = fmt.Sprintf("cheapest expected hourly price of %d fitting classes", res.fitting)
	}
	if m := res.minNodes; m != nil && m != pl && m.nodes < pl.nodes {
		switch {
		case tg.deadlineH > 0 && m.expHours > 0:
			s += fmt.Sprintf("; %d node(s) would take %.1f h", m.nodes, m.expHours)
		case m.decode != nil:
			s += fmt.Sprintf("; %d node(s) would give %s", m.nodes, m.decode.String())
		}
	}
	return s
}

func targetText(md jobmeta.Metadata) string {
	var t []string
	if md.Deadline > 0 {
		t = append(t, "the "+fmtDur(md.Deadline)+" deadline")
	}
	if md.Latency > 0 {
		t = append(t, fmt.Sprintf("%s per token", md.Latency))
	}
	if md.Throughput > 0 {
		t = append(t, fmt.Sprintf("%s tokens/s", fmtCount(md.Throughput)))
	}
	return strings.Join(t, " and ")
}
