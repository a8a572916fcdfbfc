// Package jobmeta is the grammar of the metadata a job gives about itself in
// `--comment "burst: params=7B dataset=2TB deadline=8h ..."` (or --extra):
// one pure parser, shared by the sizing policy (what to launch), the
// submission filter and burst-agent (the job's checkpoint signal). Unknown
// keys and malformed values are errors naming the column and a fix.
package jobmeta

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
)

// Workload is what a job does with its model; it selects the memory and FLOPs
// models of internal/sizing. workload=lora and workload=qlora are read as
// finetune with method=lora or method=qlora.
type Workload string

// Workloads understood in metadata (workload=...).
const (
	WorkloadUnknown   Workload = ""
	WorkloadInference Workload = "inference"
	WorkloadFinetune  Workload = "finetune"
	WorkloadTrain     Workload = "train"
)

// Method is how a fine-tune (or training run) updates the model
// (method=full|lora|qlora).
type Method string

// Methods understood in metadata. MethodUnknown means full for finetune and
// train.
const (
	MethodUnknown Method = ""
	MethodFull    Method = "full"
	MethodLoRA    Method = "lora"  // frozen 16-bit weights, low-rank adapters trained (Hu et al. 2021)
	MethodQLoRA   Method = "qlora" // frozen 4-bit NF4 weights, adapters trained (Dettmers et al. 2023)
)

// Sharding is how training state is split over the job's GPUs
// (sharding=...).
type Sharding string

// Shardings understood in metadata. ShardingAuto lets the sizer choose:
// replicated when the model state fits on one GPU, else ZeRO-3/FSDP.
const (
	ShardingAuto       Sharding = ""
	ShardingReplicated Sharding = "replicated" // DDP: every GPU holds everything
	ShardingZeRO1      Sharding = "zero1"      // optimizer state sharded
	ShardingZeRO2      Sharding = "zero2"      // optimizer state and gradients sharded
	ShardingZeRO3      Sharding = "zero3"      // everything sharded (FSDP full shard)
)

// Precision is the numeric format of a model's weights.
type Precision string

// Precisions understood in metadata (precision=...).
const (
	PrecisionUnknown Precision = ""
	PrecisionFP32    Precision = "fp32"
	PrecisionFP16    Precision = "fp16"
	PrecisionBF16    Precision = "bf16"
	PrecisionFP8     Precision = "fp8"
	PrecisionInt8    Precision = "int8"
	PrecisionInt4    Precision = "int4"
)

// Precisions is every precision metadata accepts (the sizing policy has a
// weight size for each).
var Precisions = []Precision{PrecisionFP32, PrecisionFP16, PrecisionBF16, PrecisionFP8, PrecisionInt8, PrecisionInt4}

// BytesPerToken is the dataset-size-to-token conversion used when metadata
// gives dataset= but not tokens=: about 4 bytes of text per token for BPE
// tokenizers on English text (GPT-2/Llama tokenizers average 3.5-4.5).
const BytesPerToken = 4.0

// Metadata is what a job says about itself in `--comment "burst: ..."`.
// Zero values mean "not given".
type Metadata struct {
	Params           float64       // model parameters (params=7B)
	DatasetBytes     float64       // training data size (dataset=2TB)
	Tokens           float64       // training tokens (tokens=1T); wins over DatasetBytes
	Epochs           float64       // passes over the data (epochs=3); 0 means 1
	Deadline         time.Duration // wall-clock deadline from submission (deadline=8h)
	Workload         Workload      // workload=inference|finetune|train (lora/qlora set Method)
	Method           Method        // method=full|lora|qlora
	Precision        Precision     // precision=fp32|fp16|bf16|fp8|int8|int4
	Sharding         Sharding      // sharding=ddp|zero1|zero2|zero3|fsdp
	Seq              int           // training sequence length in tokens (seq=4096, seq=8K)
	Batch            int           // micro-batch per GPU (training) or concurrent sequences (inference)
	Context          int           // inference context length in tokens (context=8K)
	Layers           int           // transformer layers (layers=32); default from a known architecture
	Hidden           int           // hidden size (hidden=4096)
	Heads            int           // attention heads (heads=32)
	KVHeads          int           // key/value heads, for grouped-query attention (kv_heads=8)
	Latency          time.Duration // inference: per-token decode latency target (latency=50ms)
	Throughput       float64       // inference: tokens/s target over all sequences (throughput=2K)
	Checkpoint       time.Duration // checkpoint interval (checkpoint=30m)
	NoCheckpoint     bool          // checkpoint=none: the job cannot checkpoint
	CheckpointSignal string        // checkpoint_signal=USR1: signal the agent sends before a spot interruption
	// CheckpointTo is where the checkpoint signal goes (checkpoint_to=):
	// the batch shell (default) or every process of every step.
	CheckpointTo CheckpointTarget
	// Rebalance is what a rebalance recommendation does to the job
	// (rebalance=): nothing beyond draining its node (default), or an early
	// checkpoint (SIGUSR2 to the batch shell).
	Rebalance RebalanceAction
	Capacity  capacity.Type // capacity=spot|on-demand
	Keys      []string      // keys given, in order (for messages)
}

// HasModel reports whether the job gave its parameter count.
func (m Metadata) HasModel() bool { return m.Params > 0 }

// TrainTokens is the number of tokens the job processes: tokens=, or
// dataset= / BytesPerToken, times epochs. 0 when unknown.
func (m Metadata) TrainTokens() float64 {
	t := m.Tokens
	if t == 0 && m.DatasetBytes > 0 {
		t = m.DatasetBytes / BytesPerToken
	}
	if m.Epochs > 0 {
		t *= m.Epochs
	}
	return t
}

// MetadataPrefix introduces burst metadata in a job comment.
const MetadataPrefix = "burst:"

// CheckpointTarget is where burst sends a job's checkpoint signal.
type CheckpointTarget string

// Checkpoint targets (checkpoint_to=).
const (
	// CheckpointToBatch: the batch shell only (scancel --batch), which
	// forwards the request to its ranks (examples/train writes the request
	// file rank 0 reads). The default.
	CheckpointToBatch CheckpointTarget = ""
	// CheckpointToSteps: every process of every step on every node of the
	// job (scancel without --batch): each rank takes the signal itself.
	CheckpointToSteps CheckpointTarget = "steps"
)

// RebalanceAction is what a rebalance recommendation does to a job.
type RebalanceAction string

// Rebalance actions (rebalance=).
const (
	// RebalanceDrain: the node is drained (no new jobs); the job runs on
	// undisturbed. The default.
	RebalanceDrain RebalanceAction = ""
	// RebalanceCheckpoint: the node is drained and the job's batch shell
	// gets SIGUSR2, examples/train's early checkpoint (no marker, no requeue).
	RebalanceCheckpoint RebalanceAction = "checkpoint"
)

// ModelSignature is the part of the metadata that describes the model and
// how it is run (not the deadline, checkpointing or capacity): two runs with
// the same signature use the same GPU memory. Learning keys a recurring job
// on it, with its user and job name.
func (m Metadata) ModelSignature() string {
	var b strings.Builder
	add := func(k, v string) {
		if v != "" && v != "0" {
			fmt.Fprintf(&b, "%s=%s ", k, v)
		}
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	i := strconv.Itoa
	add("params", f(m.Params))
	add("tokens", f(m.TrainTokens()))
	add("workload", string(m.Workload))
	add("method", string(m.Method))
	add("precision", string(m.Precision))
	add("sharding", string(m.Sharding))
	add("seq", i(m.Seq))
	add("batch", i(m.Batch))
	add("context", i(m.Context))
	add("layers", i(m.Layers))
	add("hidden", i(m.Hidden))
	add("heads", i(m.Heads))
	add("kv_heads", i(m.KVHeads))
	return strings.TrimSpace(b.String())
}
