package sizing

import (
	"fmt"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// ZeRO-3/FSDP across nodes, bounded by the network. ZeRO-3 all-gathers
// the weights in the forward and again in the backward pass of every
// micro-batch and reduce-scatters the gradients (ZeRO paper §7.2.2:
// 1.5x a DDP all-reduce); unlike DDP's all-reduce, which runs once per
// optimizer step and which gradient accumulation amortises, these
// transfers recur with every micro-batch. In a ring collective each node's
// link carries (N-1)/N of the data, whatever the GPUs per node (Patarasuk &
// Yuan 2009), so per micro-batch a node moves
//
//	bytes = (2·W + G) · (N-1)/N        W: weight bytes, G: gradient bytes
//
// over its network bandwidth (the catalog's figure for the instance type,
// NetworkMbps: 2.5 Gbps for a g6.xlarge, 3,200 Gbps of EFA for a p5).
// FSDP prefetches the next layer's weights while computing, so a step
// takes the longer of compute and transfer; the efficiency is
//
//	t_compute / max(t_compute, t_net)
//	t_compute = k·(P + 2·L·h·s)·s·b / (peak x MFU)   one GPU's micro-batch
//
// and the plan takes the lower of this and the fabric's factor (scaling.go).
// On p4d/p5 nodes it is 1 for every model burst sizes (the fabric factor
// decides); over TCP between small instances it dominates: a 65B QLoRA
// job over three g6.xlarge moves 47 GB per 14 s micro-batch over 2.5 Gbps.
func shardedNetEfficiency(m *Model, gpuModel string, fab Fabric, nodes int) (float64, string) {
	if m == nil || !m.Training() || nodes < 2 || fab.Mbps <= 0 {
		return 1, ""
	}
	w, g, _ := m.stateBytes()
	if m.Method == jobmeta.MethodLoRA || m.Method == jobmeta.MethodQLoRA {
		w -= g // the adapters' weights are not gathered (a share of w)
	}
	N := float64(nodes)
	bytes := (2*w + g) * (N - 1) / N
	tNet := bytes / (float64(fab.Mbps) / 8 * 1e6)
	k := FLOPsPerParamToken(m.Workload, m.Method)
	tokens := float64(m.Seq) * float64(m.Batch)
	tComp := TrainingFLOPs(k, m.Params, m.Arch, m.Seq, tokens) / (PerfOf(gpuModel).EffectiveTFLOPSAt(m.Params) * 1e12)
	if tNet <= tComp {
		return 1, ""
	}
	e := tComp / tNet
	return e, fmt.Sprintf("ZeRO-3 across nodes moves %.1f GB per node per micro-batch over %g Gbps: %.1f s against %.1f s of compute, efficiency %.3g", bytes/1e9, float64(fab.Mbps)/1000, tNet, tComp, e)
}
