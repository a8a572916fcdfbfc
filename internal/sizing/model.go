package sizing

import (
	"math"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// FLOPsPerParamToken is the compute per parameter per token: 6 for full
// training (2 forward + 4 backward; Kaplan et al. 2020, "Scaling Laws for
// Neural Language Models", C = 6ND), 4 for LoRA and QLoRA (forward plus the
// backward pass for activations; weight gradients only for the adapters),
// 2 for inference (forward only). Activation recomputation is not counted:
// MFU is defined on model FLOPs, so its cost is inside the MFU figure.
func FLOPsPerParamToken(w jobmeta.Workload, m jobmeta.Method) float64 {
	switch {
	case w == jobmeta.WorkloadInference:
		return 2
	case m == jobmeta.MethodLoRA || m == jobmeta.MethodQLoRA:
		return 4
	case w == jobmeta.WorkloadFinetune || w == jobmeta.WorkloadTrain:
		return 6
	}
	return 2
}

// GPUPerf is a GPU model's dense 16-bit tensor peak and the largest model
// FLOPs utilisation (m of MFUAt, mfu.go) burst assumes a job reaches on it.
type GPUPerf struct {
	PeakTFLOPS float64 // dense (no sparsity) BF16/FP16 tensor-core peak, TFLOP/s
	MFU        float64 // m: the MFU of a very large model (MFUAt gives a job's)
	Source     string  // where PeakTFLOPS comes from
}

// Peaks from NVIDIA's datasheets; m from the fit in mfu.go.
var gpuPerf = map[string]GPUPerf{
	"t4":                  {65, mfuMax["t4"], "NVIDIA T4 datasheet: 65 TFLOPS FP16 tensor (mixed precision); no BF16"},
	"t4g":                 {65, mfuMax["t4g"], "NVIDIA T4G (Graviton g5g) is a T4: 65 TFLOPS FP16 tensor"},
	"a10g":                {125, mfuMax["a10g"], "NVIDIA A10 datasheet: 125 TFLOPS BF16 tensor dense (250 sparse); NVIDIA publishes no separate A10G sheet"},
	"l4":                  {121, mfuMax["l4"], "NVIDIA L4 datasheet: 242 TFLOPS BF16 tensor with sparsity, 121 dense"},
	"l40s":                {362, mfuMax["l40s"], "NVIDIA L40S datasheet: 362.05 TFLOPS BF16 tensor dense (733 sparse)"},
	"v100":                {125, mfuMax["v100"], "NVIDIA V100 SXM2 datasheet: 125 TFLOPS tensor (FP16); no BF16"},
	"a100":                {312, mfuMax["a100"], "NVIDIA A100 datasheet: 312 TFLOPS BF16 tensor dense (624 sparse)"},
	"h100":                {989, mfuMax["h100"], "NVIDIA H100 SXM datasheet: 1,979 TFLOPS BF16 tensor with sparsity, 989 dense"},
	"h200":                {989, mfuMax["h200"], "NVIDIA H200 SXM datasheet: 1,979 TFLOPS BF16 tensor with sparsity, 989 dense"},
	"b200":                {2250, mfuMax["b200"], "NVIDIA HGX B200 datasheet: 36 PFLOPS FP16/BF16 sparse per 8 GPUs, 2.25 PFLOPS dense per GPU"},
	"b300":                {2250, mfuMax["b300"], "NVIDIA HGX B300 datasheet: same FP16/BF16 dense tensor rate as B200 (2.25 PFLOPS); B300 gains are in FP4"},
	"rtx-pro-server-6000": {500, mfuMax["rtx-pro-server-6000"], "estimate: NVIDIA RTX PRO 6000 Blackwell Server datasheet gives 4 PFLOPS FP4 sparse; halved per precision step and for sparsity"},
	"rtx-pro-4500":        {200, mfuMax["rtx-pro-4500"], "estimate: NVIDIA RTX PRO 4500 Blackwell, scaled from its FP4 sparse peak as for the RTX PRO 6000"},
}

// unknownPerf is used for a GPU model missing from the table.
var unknownPerf = GPUPerf{PeakTFLOPS: 60, MFU: MFUMaxA100 * MFUScaleInference, Source: "unknown GPU model: assumed 60 TFLOPS, T4-class"}

// PerfOf returns the performance assumptions for a GPU model (GRES type).
func PerfOf(gpuModel string) GPUPerf {
	if p, ok := gpuPerf[gpuModel]; ok {
		return p
	}
	return unknownPerf
}

// ComputeHours is the time to do flops on n GPUs of a model at the MFU a
// job with params parameters reaches (MFUAt) and a scaling efficiency (1
// for one GPU; see Efficiency).
func ComputeHours(flops float64, gpuModel string, params float64, n int, efficiency float64) float64 {
	if flops <= 0 || n <= 0 || efficiency <= 0 {
		return 0
	}
	return flops / (float64(n) * PerfOf(gpuModel).EffectiveTFLOPSAt(params) * 1e12 * efficiency) / 3600
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
