package sizing

import "math"

// The utilisation (MFU) model: the fraction of a GPU's dense 16-bit peak
// a training job reaches, as a function of its GPU and model size,
//
//	MFU(gpu, P) = m_gpu / (1 + (P0_gpu / P)^beta),   P0_gpu = P0 x peak_gpu / 989 TFLOPS
//
// A small model does too little work per kernel and per step to keep a
// GPU busy (launch overheads, optimizer and communication steps that do
// not scale with width), and the faster the GPU the larger the model it
// needs: P0 scales with the GPU's peak. Sequence length enters through the
// FLOPs (TrainingFLOPs: the attention term of PaLM's MFU, Chowdhery et al.
// 2022, Appendix B), node count through the scaling efficiency
// (scaling.go): the published runs below are all large multi-node runs
// on NVLink nodes with a fast fabric, so m and P0 already hold their
// communication.
//
// The parameters are a least-squares fit (of log MFU) to the published
// pretraining runs of the fit set in calibration_runs_test.go (Llama 2
// 7B/13B/70B, Llama 3 8B/70B and 3.1 405B, BLOOM 176B, MPT-7B and Pythia
// 1B: GPU-hours, tokens and GPU type from their papers and model cards,
// each checked against its source, the place named in the test data);
// TestMFUFit redoes the fit and fails if these are not its optimum. A
// second set of runs (LLaMA 7B-65B, TinyLlama 1.1B) is held out;
// sizer/README.md reports the error on each. OPT-175B and six Pythia sizes
// were dropped: their GPU-hours could not be confirmed at the source.
const (
	MFUMaxA100 = 0.4560 // m for A100 (fitted)
	MFUMaxH100 = 0.3195 // m for H100 (fitted); H200, B200 and B300 use it too
	MFUP0      = 3.39e8 // parameters (at 989 TFLOPS) where MFU is half of m (fitted)
	MFUBeta    = 0.4708 // (fitted)
	// GPUs without a published run use the A100's m scaled by the ratio burst
	// assumed before the fit (0.35 / 0.40 for V100, L40S and the RTX PRO
	// parts; 0.30 / 0.40 for the PCIe inference-class T4, L4, A10G): an
	// assumption, not a measurement.
	MFUScaleWorkstation = 0.875
	MFUScaleInference   = 0.75
)

// mfuMax is m_gpu for each GPU model.
var mfuMax = map[string]float64{
	"a100": MFUMaxA100, "h100": MFUMaxH100, "h200": MFUMaxH100, "b200": MFUMaxH100, "b300": MFUMaxH100,
	"v100": MFUMaxA100 * MFUScaleWorkstation, "l40s": MFUMaxA100 * MFUScaleWorkstation,
	"rtx-pro-server-6000": MFUMaxA100 * MFUScaleWorkstation, "rtx-pro-4500": MFUMaxA100 * MFUScaleWorkstation,
	"t4": MFUMaxA100 * MFUScaleInference, "t4g": MFUMaxA100 * MFUScaleInference,
	"a10g": MFUMaxA100 * MFUScaleInference, "l4": MFUMaxA100 * MFUScaleInference,
}

// mfuOf is MFU(gpu, P) above with the model's parameters given.
func mfuOf(maxMFU, peakTFLOPS, params, p0, beta float64) float64 {
	if params <= 0 {
		return maxMFU / 2
	}
	return maxMFU / (1 + math.Pow(p0*peakTFLOPS/989/params, beta))
}

// MFUAt is the MFU a job with params parameters reaches on a GPU model.
func (g GPUPerf) MFUAt(params float64) float64 {
	return mfuOf(g.MFU, g.PeakTFLOPS, params, MFUP0, MFUBeta)
}

// EffectiveTFLOPSAt is PeakTFLOPS x MFUAt(params).
func (g GPUPerf) EffectiveTFLOPSAt(params float64) float64 { return g.PeakTFLOPS * g.MFUAt(params) }

// TrainingFLOPs is the compute of a training job: per token k x (P +
// 2·L·h·s), k = FLOPsPerParamToken, with the attention scores and their
// product with the values (2·L·h·s multiply-adds per token per pass, which
// 6ND leaves out; PaLM, Chowdhery et al. 2022, Appendix B: 6N + 12·L·H·Q·T).
func TrainingFLOPs(k, params float64, a Arch, seq int, tokens float64) float64 {
	return k * (params + 2*float64(a.Layers)*float64(a.Hidden)*float64(seq)) * tokens
}
