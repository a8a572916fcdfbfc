package sizing

import (
	"fmt"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// The GPU memory model (every constant with its source; sizer/README.md
// has the calibration against published runs).
//
// Training, per parameter, before sharding:
//   - full fine-tune / training with Adam in mixed precision: 2 B bf16
//     weights + 2 B bf16 gradients + 12 B optimizer state (fp32 master
//     weights and the two Adam moments) = 16 B (ZeRO, Rajbhandari et al.
//     2020, §3.1: "2Ψ + 2Ψ + KΨ with K = 12"). fp32 training: 4 + 4 + 8.
//   - LoRA (Hu et al. 2021): the frozen weights at the job's precision (2 B
//     in bf16), plus LoRATrainableFraction of the parameters trained as
//     adapters at AdapterBytes each.
//   - QLoRA (Dettmers et al. 2023): the frozen weights in 4-bit NormalFloat
//     with double-quantised block constants: (4 + 0.127) bits = QLoRAWeightBytes
//     per parameter (QLoRA paper, §3 "Double Quantization": constants cost
//     0.127 bits per parameter), plus adapters as for LoRA.
//
// Sharding over the N GPUs of every node of the job (ZeRO paper, Figure 1):
// zero1 divides the optimizer state by N, zero2 also the gradients, zero3
// (FSDP full shard) also the weights; replicated (DDP) divides nothing.
// With sharding=auto (not given) the sizer uses replicated when that fits
// each GPU, else zero3.
//
// Activations per GPU, for a micro-batch of b sequences of s tokens
// (batch=, seq=; default 1 x 2048), hidden size h, L layers, vocabulary V,
// with activation checkpointing and FlashAttention assumed (no s^2 term):
// each layer keeps its 16-bit input, 2·s·b·h bytes, and the layer being
// recomputed holds its full activations, 34·s·b·h bytes (Korthikanti et al.
// 2022, "Reducing Activation Recomputation in Large Transformer Models",
// §4, eq. 1 without the 5·a·s/h attention-score term that FlashAttention
// removes); the logits for the loss are fp32: 4·s·b·V bytes.
//
// Inference: the weights (at the job's precision) plus the KV cache,
// 2 (K and V) · L · kv_heads · head_dim · context · batch · 2 bytes (fp16;
// 1 byte with precision=fp8), both split over every GPU of the job (tensor
// parallel within a node, pipeline stages across nodes); context defaults
// to 4096 tokens and batch to 1.
//
// Of each GPU's memory, Params.UsableGPUMemoryFraction (0.9) counts, for the
// CUDA context, NCCL buffers and allocator fragmentation.
const (
	AdamMixedPrecisionBytes = 16.0  // 2 + 2 + 12 (ZeRO §3.1)
	AdamFP32Bytes           = 16.0  // 4 + 4 + 8
	LoRATrainableFraction   = 0.01  // adapters as a share of the parameters (r=16-64 on every linear layer of a 7-70B model is 0.4-1.2%)
	AdapterBytes            = 16.0  // fp32 adapter weight + gradient + two Adam moments
	QLoRAWeightBytes        = 0.516 // (4 + 0.127) bits
	DefaultSeq              = 2048
	DefaultContext          = 4096
	ActivationLayerBytes    = 34.0 // per s·b·h for the layer being recomputed (Korthikanti et al. 2022)
	CheckpointedInputBytes  = 2.0  // per s·b·h per layer: the layer's 16-bit input
	LogitBytes              = 4.0  // per s·b·V: fp32 logits
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

// WeightBytes is the size of one parameter at a precision.
func WeightBytes(p jobmeta.Precision) float64 {
	if b, ok := weightBytes[p]; ok {
		return b
	}
	return 2
}

// Model is what the sizer knows about a job's model, from its metadata.
type Model struct {
	Params    float64
	Workload  jobmeta.Workload // inference, finetune or train (resolved)
	Method    jobmeta.Method   // full, lora or qlora (training only)
	Precision jobmeta.Precision
	Sharding  jobmeta.Sharding // as given; ShardingAuto lets the planner choose
	Arch      Arch
	ArchNote  string
	Seq       int // training tokens per sequence
	Batch     int // training micro-batch per GPU, or inference concurrent sequences
	Context   int // inference context
}

// ModelOf builds the Model of a job with params= (workload already resolved).
func ModelOf(md jobmeta.Metadata, w jobmeta.Workload) Model {
	m := Model{Params: md.Params, Workload: w, Method: md.Method, Precision: md.Precision, Sharding: md.Sharding, Seq: md.Seq, Batch: md.Batch, Context: md.Context}
	m.Arch, m.ArchNote = ArchFor(md)
	if w != jobmeta.WorkloadInference && m.Method == jobmeta.MethodUnknown {
		m.Method = jobmeta.MethodFull
	}
	if m.Batch == 0 {
		m.Batch = 1
	}
	if w == jobmeta.WorkloadInference {
		if m.Context == 0 {
			m.Context = md.Seq
		}
		if m.Context == 0 {
			m.Context = DefaultContext
		}
	} else if m.Seq == 0 {
		m.Seq = DefaultSeq
	}
	return m
}

// Training reports whether the model is trained (finetune or train).
func (m Model) Training() bool { return m.Workload != jobmeta.WorkloadInference }

// Memory is the GPU memory one GPU of a job needs, in bytes, by part.
type Memory struct {
	Weights     float64 `json:"weights"`
	Gradients   float64 `json:"gradients"`
	Optimizer   float64 `json:"optimizer"`
	Activations float64 `json:"activations"`
	KVCache     float64 `json:"kv_cache"`
	GPUs        int     `json:"gpus"`     // GPUs the job spans (every node)
	Sharding    string  `json:"sharding"` // how training state is split; "tensor/pipeline" for inference
}

// PerGPU is the sum of the parts.
func (m Memory) PerGPU() float64 {
	return m.Weights + m.Gradients + m.Optimizer + m.Activations + m.KVCache
}

// MemoryGiB is Memory in GiB (rounded to 0.01), as decisions report it.
type MemoryGiB struct {
	Weights     float64 `json:"weights"`
	Gradients   float64 `json:"gradients,omitempty"`
	Optimizer   float64 `json:"optimizer,omitempty"`
	Activations float64 `json:"activations,omitempty"`
	KVCache     float64 `json:"kv_cache,omitempty"`
	PerGPU      float64 `json:"per_gpu"`
	GPUs        int     `json:"gpus"`
}

// GiB converts to GiB.
func (m Memory) GiB() *MemoryGiB {
	g := func(b float64) float64 { return round2(b / (1 << 30)) }
	return &MemoryGiB{Weights: g(m.Weights), Gradients: g(m.Gradients), Optimizer: g(m.Optimizer), Activations: g(m.Activations), KVCache: g(m.KVCache), PerGPU: g(m.PerGPU()), GPUs: m.GPUs}
}

// Total is the need over every GPU of the job.
func (m Memory) Total() float64 { return m.PerGPU() * float64(max(m.GPUs, 1)) }

// String describes the parts in GiB.
func (m Memory) String() string {
	g := func(b float64) float64 { return b / (1 << 30) }
	if m.Sharding == "tensor/pipeline" {
		return fmt.Sprintf("%.1f GiB per GPU over %d GPU(s): weights %.1f + KV cache %.1f", g(m.PerGPU()), m.GPUs, g(m.Weights), g(m.KVCache))
	}
	return fmt.Sprintf("%.1f GiB per GPU over %d GPU(s), %s: weights %.1f + gradients %.1f + optimizer %.1f + activations %.1f",
		g(m.PerGPU()), m.GPUs, m.Sharding, g(m.Weights), g(m.Gradients), g(m.Optimizer), g(m.Activations))
}

// stateBytes are the per-parameter-count bytes of the model state before
// sharding: weights, gradients, optimizer.
func (m Model) stateBytes() (w, g, o float64) {
	P := m.Params
	switch m.Method {
	case jobmeta.MethodLoRA, jobmeta.MethodQLoRA:
		wb := WeightBytes(m.Precision)
		if m.Method == jobmeta.MethodQLoRA {
			wb = QLoRAWeightBytes
		}
		t := LoRATrainableFraction * P
		// adapter weights 4 B, gradients 4 B, Adam moments 8 B (AdapterBytes)
		return wb*P + 4*t, 4 * t, 8 * t
	}
	if m.Precision == jobmeta.PrecisionFP32 {
		return 4 * P, 4 * P, 8 * P
	}
	return 2 * P, 2 * P, 12 * P
}

// activations is the per-GPU activation memory of training (see above).
func (m Model) activations() float64 {
	a := m.Arch
	sbh := float64(m.Seq) * float64(m.Batch) * float64(a.Hidden)
	return CheckpointedInputBytes*sbh*float64(a.Layers) + ActivationLayerBytes*sbh + LogitBytes*float64(m.Seq)*float64(m.Batch)*float64(a.Vocab)
}

// KVCacheBytes is the whole KV cache of an inference job (all GPUs).
func (m Model) KVCacheBytes() float64 {
	a := m.Arch
	kvb := 2.0
	if m.Precision == jobmeta.PrecisionFP8 {
		kvb = 1
	}
	return 2 * float64(a.Layers) * float64(a.KVHeads) * float64(a.HeadDim()) * float64(m.Context) * float64(m.Batch) * kvb
}

// InferenceWeightBytes is the size of the weights an inference job loads.
func (m Model) InferenceWeightBytes() float64 { return WeightBytes(m.Precision) * m.Params }

// MemoryOn is the per-GPU need when the job spans gpus GPUs with a
// sharding (ShardingAuto is not resolved here: pass a concrete one for
// training; inference ignores it).
func (m Model) MemoryOn(gpus int, sh jobmeta.Sharding) Memory {
	n := float64(max(gpus, 1))
	if !m.Training() {
		return Memory{Weights: m.InferenceWeightBytes() / n, KVCache: m.KVCacheBytes() / n, GPUs: gpus, Sharding: "tensor/pipeline"}
	}
	w, g, o := m.stateBytes()
	switch sh {
	case jobmeta.ShardingZeRO1:
		o /= n
	case jobmeta.ShardingZeRO2:
		g, o = g/n, o/n
	case jobmeta.ShardingZeRO3:
		w, g, o = w/n, g/n, o/n
	}
	name := string(sh)
	if sh == jobmeta.ShardingReplicated {
		name = "replicated (DDP)"
	} else if sh == jobmeta.ShardingZeRO3 {
		name = "zero3 (FSDP full shard)"
	}
	return Memory{Weights: w, Gradients: g, Optimizer: o, Activations: m.activations(), GPUs: gpus, Sharding: name}
}

// CommVolume is the data-parallel traffic of one step relative to an
// all-reduce of 16-bit gradients of every parameter (the DDP baseline, 1):
// ZeRO-1/2 move the same volume, ZeRO-3 1.5 times it (ZeRO paper §7.2.2);
// LoRA all-reduces only its adapters (LoRATrainableFraction), and under
// ZeRO-3 also all-gathers the frozen weights twice per step (forward and
// backward): weight bytes / 2 more. Inference moves activations only (0).
func (m Model) CommVolume(sh jobmeta.Sharding) float64 {
	if !m.Training() {
		return 0
	}
	lora := m.Method == jobmeta.MethodLoRA || m.Method == jobmeta.MethodQLoRA
	switch {
	case lora && sh == jobmeta.ShardingZeRO3:
		wb := WeightBytes(m.Precision)
		if m.Method == jobmeta.MethodQLoRA {
			wb = QLoRAWeightBytes
		}
		return LoRATrainableFraction + wb/2
	case lora:
		return LoRATrainableFraction
	case sh == jobmeta.ShardingZeRO3:
		return 1.5
	}
	return 1
}
