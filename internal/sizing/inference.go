package sizing

import "fmt"

// The inference time model: autoregressive decoding is memory-bandwidth
// bound. Each generated token reads every weight once and each sequence's
// KV cache once, so one decode step of a batch of B sequences takes
//
//	t_mem  = (weights + KV cache of all B sequences) / (GPUs x HBM bandwidth x MBU)
//	t_comp = 2 x params x B / (GPUs x peak x MFU)
//	t_step = max(t_mem, t_comp)
//
// with the weights split over the GPUs of a node (tensor parallel) and the
// layers over nodes (pipeline), so a step reads each byte once somewhere:
// per-token latency = t_step and throughput = nodes x B / t_step tokens/s
// (pipeline stages each working on another micro-batch). The KV cache is
// taken at the full context= (the worst case: the last token of each
// sequence). MBU, the achieved share of the datasheet bandwidth, is
// DecodeMBU = 0.5: MosaicML/Databricks ("LLM Inference Performance
// Engineering: Best Practices", 2023) define MBU this way and report
// 50-60% for 7-70B models at small batch on A100/H100 with tensor
// parallelism. Prefill (the prompt) is compute bound and not modelled.
const DecodeMBU = 0.5

// Decode is the decode-speed estimate of an inference job on a plan.
type Decode struct {
	TokenLatencySec float64 // seconds per token of one sequence
	TokensPerSec    float64 // over the whole batch and every pipeline stage
	Bound           string  // "memory" or "compute"
}

// DecodeOn estimates decoding for m on nodes nodes of gpn GPUs of gpuModel
// with memMiB per GPU; ok is false without a bandwidth figure.
func DecodeOn(m Model, gpuModel string, memMiB, nodes, gpn int) (Decode, bool) {
	bw, ok := BandwidthOf(gpuModel, memMiB)
	if !ok || gpn < 1 || nodes < 1 {
		return Decode{}, false
	}
	g := float64(gpn)
	bytes := m.InferenceWeightBytes() + m.KVCacheBytes()
	tMem := bytes / (g * bw.GBps * 1e9 * DecodeMBU)
	tComp := 2 * m.Params * float64(m.Batch) / (g * PerfOf(gpuModel).EffectiveTFLOPSAt(m.Params) * 1e12)
	d := Decode{TokenLatencySec: tMem, Bound: "memory"}
	if tComp > tMem {
		d.TokenLatencySec, d.Bound = tComp, "compute"
	}
	d.TokensPerSec = float64(nodes) * float64(m.Batch) / d.TokenLatencySec
	return d, true
}

// String describes the estimate.
func (d Decode) String() string {
	return fmt.Sprintf("decode %.1f ms/token, %.0f tokens/s (%s bound)", d.TokenLatencySec*1000, d.TokensPerSec, d.Bound)
}
