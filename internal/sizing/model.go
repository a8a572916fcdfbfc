package sizing

import (
	"math"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// weightBytes is the size of one parameter in each precision.
var weightBytes = map[jobmeta.Precision]float64{
	jobmeta.PrecisionUnknown: 2, // bf16/fp16 is the default for modern checkpoints
	jobmeta.PrecisionFP32:    4,
	jobmeta.PrecisionFP16:    2,
	jobmeta.PrecisionBF16:    2,
	jobmeta.PrecisionFP8:     1,
	jobmeta.PrecisionInt8:    1,
	jobmeta.PrecisionInt4:    0.5,
}

// The GPU memory model. Bytes per parameter, before activations:
//
//   - inference: the weights only, weightBytes[precision] (fp16/bf16: 2 B,
//     fp8/int8: 1 B, int4: 0.5 B), times InferenceOverhead for KV cache and
//     activations (1.2: a 20% allowance, which holds a few thousand tokens of
//     KV cache for batch sizes of a few sequences).
//   - lora (LoRA / QLoRA / PEFT): frozen weights at weightBytes[precision],
//     plus LoRATrainableFraction (1%) of the parameters trained with Adam in
//     mixed precision (16 B each), times TrainActivationOverhead.
//   - finetune and train (full-parameter training with Adam, mixed precision):
//     2 B bf16 weights + 2 B bf16 gradients + 12 B fp32 master weights and two
//     Adam moments = 16 B/param (ZeRO paper, Rajbhandari et al. 2020, §3.1),
//     times TrainActivationOverhead (1.15) for activations with activation
//     checkpointing: about 18.4 B/param. fp32 training also totals 16 B/param
//     (4 weights + 4 grads + 8 Adam moments).
//
// Memory is summed over the GPUs of one node: burst assumes model state is
// sharded within a node (FSDP / ZeRO-3 over NVLink or PCIe) and that extra
// nodes add data parallelism, each node holding a full sharded copy. Of each
// GPU's memory only UsableGPUMemoryFraction (Params) is counted, leaving room
// for the CUDA context, NCCL buffers and allocator fragmentation.
const (
	InferenceOverhead       = 1.2
	TrainActivationOverhead = 1.15
	LoRATrainableFraction   = 0.01
	AdamMixedPrecisionBytes = 16.0
)

// MemoryBytesPerParam returns the GPU bytes one parameter costs for a workload
// at a precision (see the memory model above). An unknown workload counts as
// inference when no training data is given and as full fine-tuning otherwise
// (callers decide; this function treats WorkloadUnknown as inference).
func MemoryBytesPerParam(w jobmeta.Workload, p jobmeta.Precision) float64 {
	wb, ok := weightBytes[p]
	if !ok {
		wb = 2
	}
	switch w {
	case jobmeta.WorkloadLoRA:
		return (wb + LoRATrainableFraction*AdamMixedPrecisionBytes) * TrainActivationOverhead
	case jobmeta.WorkloadFinetune, jobmeta.WorkloadTrain:
		return AdamMixedPrecisionBytes * TrainActivationOverhead
	default:
		return wb * InferenceOverhead
	}
}

// FLOPsPerParamToken is the compute per parameter per token: 6 for full
// training (2 forward + 4 backward; Kaplan et al. 2020, "Scaling Laws for
// Neural Language Models", C = 6ND), 4 for LoRA (forward plus the backward
// pass for activations; weight gradients only for the adapters), 2 for
// inference (forward only).
func FLOPsPerParamToken(w jobmeta.Workload) float64 {
	switch w {
	case jobmeta.WorkloadFinetune, jobmeta.WorkloadTrain:
		return 6
	case jobmeta.WorkloadLoRA:
		return 4
	default:
		return 2
	}
}

// GPUPerf is a GPU model's dense 16-bit tensor peak and the model FLOPs
// utilisation (MFU) burst assumes a job reaches on it.
type GPUPerf struct {
	PeakTFLOPS float64 // dense (no sparsity) BF16/FP16 tensor-core peak, TFLOP/s
	MFU        float64 // assumed achieved fraction of PeakTFLOPS
	Source     string  // where PeakTFLOPS comes from
}

// EffectiveTFLOPS is PeakTFLOPS x MFU.
func (g GPUPerf) EffectiveTFLOPS() float64 { return g.PeakTFLOPS * g.MFU }

// MFU assumptions: 0.40 for data-centre training GPUs (A100, H100, H200,
// B200, B300: large-model training runs report 38-43% BF16 MFU, e.g. the Llama
// 3 paper, Meta 2024), 0.35 for V100, L40S and the RTX PRO parts, 0.30 for the
// inference-class T4, L4 and A10G (PCIe, small memory, smaller batches).
var gpuPerf = map[string]GPUPerf{
	"t4":                  {65, 0.30, "NVIDIA T4 datasheet: 65 TFLOPS FP16 tensor (mixed precision); no BF16"},
	"t4g":                 {65, 0.30, "NVIDIA T4G (Graviton g5g) is a T4: 65 TFLOPS FP16 tensor"},
	"a10g":                {125, 0.30, "NVIDIA A10 datasheet: 125 TFLOPS BF16 tensor dense (250 sparse); NVIDIA publishes no separate A10G sheet"},
	"l4":                  {121, 0.30, "NVIDIA L4 datasheet: 242 TFLOPS BF16 tensor with sparsity, 121 dense"},
	"l40s":                {362, 0.35, "NVIDIA L40S datasheet: 362.05 TFLOPS BF16 tensor dense (733 sparse)"},
	"v100":                {125, 0.35, "NVIDIA V100 SXM2 datasheet: 125 TFLOPS tensor (FP16); no BF16"},
	"a100":                {312, 0.40, "NVIDIA A100 datasheet: 312 TFLOPS BF16 tensor dense (624 sparse)"},
	"h100":                {989, 0.40, "NVIDIA H100 SXM datasheet: 1,979 TFLOPS BF16 tensor with sparsity, 989 dense"},
	"h200":                {989, 0.40, "NVIDIA H200 SXM datasheet: 1,979 TFLOPS BF16 tensor with sparsity, 989 dense"},
	"b200":                {2250, 0.40, "NVIDIA HGX B200 datasheet: 36 PFLOPS FP16/BF16 sparse per 8 GPUs, 2.25 PFLOPS dense per GPU"},
	"b300":                {2250, 0.40, "NVIDIA HGX B300 datasheet: same FP16/BF16 dense tensor rate as B200 (2.25 PFLOPS); B300 gains are in FP4"},
	"rtx-pro-server-6000": {500, 0.35, "estimate: NVIDIA RTX PRO 6000 Blackwell Server datasheet gives 4 PFLOPS FP4 sparse; halved per precision step and for sparsity"},
	"rtx-pro-4500":        {200, 0.35, "estimate: NVIDIA RTX PRO 4500 Blackwell, scaled from its FP4 sparse peak as for the RTX PRO 6000"},
}

// unknownPerf is used for a GPU model missing from the table.
var unknownPerf = GPUPerf{PeakTFLOPS: 60, MFU: 0.30, Source: "unknown GPU model: assumed 60 TFLOPS, T4-class"}

// PerfOf returns the performance assumptions for a GPU model (GRES type).
func PerfOf(gpuModel string) GPUPerf {
	if p, ok := gpuPerf[gpuModel]; ok {
		return p
	}
	return unknownPerf
}

// ComputeHours is the time to do flops on n GPUs of a model at its MFU.
func ComputeHours(flops float64, gpuModel string, n int) float64 {
	if flops <= 0 || n <= 0 {
		return 0
	}
	return flops / (float64(n) * PerfOf(gpuModel).EffectiveTFLOPS() * 1e12) / 3600
}

// SpotRiskFactor is the expected multiplier on a spot job's run time and cost
// from interruptions:
//
//	1 + λ × nodes × (C/2 + R)
//
// where λ is the per-instance-hour interruption probability (the Spot
// Advisor bucket's HourlyRate), nodes the number of instances the job needs
// (any one interrupted stops the job), C the checkpoint interval in hours (on
// average half an interval of work is redone) and R the relaunch overhead in
// hours (new instance boot, requeue, restore). A job that does not checkpoint
// redoes everything: C is its whole run time.
func SpotRiskFactor(hourlyRate float64, nodes int, checkpointHours, relaunchHours float64) float64 {
	if nodes < 1 {
		nodes = 1
	}
	f := 1 + hourlyRate*float64(nodes)*(checkpointHours/2+relaunchHours)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 1
	}
	return f
}
