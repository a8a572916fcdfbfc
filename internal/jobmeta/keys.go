package jobmeta

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/suggest"
)

// setter stores one key's value in md, or says why it cannot.
type setter func(md *Metadata, key, val string) *MetadataError

// setters are the keys' parsers, one a key (metadataKeys lists them).
var setters = map[string]setter{
	"params": func(md *Metadata, key, val string) *MetadataError {
		return assign(&md.Params)(bounded(key, val, positiveCount, "is not a parameter count", "use a number with optional K, M, B or T, e.g. params=7B"))
	},
	"tokens": func(md *Metadata, key, val string) *MetadataError {
		return assign(&md.Tokens)(bounded(key, val, positiveCount, "is not a token count", "use a number with optional K, M, B or T, e.g. tokens=300B"))
	},
	"dataset": func(md *Metadata, key, val string) *MetadataError {
		return assign(&md.DatasetBytes)(bounded(key, val, positiveBytes, "is not a size", "use a size such as 500GB, 2TB or 800GiB"))
	},
	"epochs": func(md *Metadata, key, val string) *MetadataError {
		return assign(&md.Epochs)(bounded(key, val, positiveFloat, "is not a positive number", "e.g. epochs=3"))
	},
	"deadline": func(md *Metadata, key, val string) *MetadataError {
		return assign(&md.Deadline)(bounded(key, val, positiveDuration, "is not a duration", "use a duration such as 8h, 90m, 2d or 1h30m"))
	},
	"checkpoint":        setCheckpoint,
	"checkpoint_signal": setCheckpointSignal,
	"checkpoint_to": func(md *Metadata, key, val string) *MetadataError {
		return oneOf(key, val, checkpointTargets, &md.CheckpointTo, "use checkpoint_to=batch (the batch shell, the default) or checkpoint_to=steps (every process of every step)")
	},
	"rebalance": func(md *Metadata, key, val string) *MetadataError {
		return oneOf(key, val, rebalanceActions, &md.Rebalance, "use rebalance=drain (the default) or rebalance=checkpoint (an early checkpoint: SIGUSR2 to the batch shell)")
	},
	"workload": setWorkload,
	"method":   setMethod,
	"sharding": func(md *Metadata, key, val string) *MetadataError {
		return oneOf(key, val, shardings, &md.Sharding, "use ddp (replicated), zero1, zero2, zero3 or fsdp")
	},
	"seq":      setTokenLen,
	"context":  setTokenLen,
	"batch":    setWhole,
	"layers":   setWhole,
	"hidden":   setWhole,
	"heads":    setWhole,
	"kv_heads": setWhole,
	"latency": func(md *Metadata, key, val string) *MetadataError {
		return assign(&md.Latency)(bounded(key, val, anyDuration, "is not a per-token latency", "use a duration such as 50ms or 0.1s"))
	},
	"throughput": func(md *Metadata, key, val string) *MetadataError {
		rate := func(s string) (float64, bool) { return count(strings.TrimSuffix(strings.ToLower(s), "/s")) }
		return assign(&md.Throughput)(bounded(key, val, rate, "is not a token rate", "use tokens per second, e.g. throughput=2000 or throughput=2K"))
	},
	"precision": setPrecision,
	"capacity": func(md *Metadata, key, val string) *MetadataError {
		return oneOf(key, val, capacities, &md.Capacity, "use capacity=spot or capacity=on-demand")
	},
}

// The values of the keys that name one of a few, by every name each has
// (matched in lower case).
var (
	checkpointTargets = map[string]CheckpointTarget{"batch": CheckpointToBatch, "steps": CheckpointToSteps}
	rebalanceActions  = map[string]RebalanceAction{"drain": RebalanceDrain, "none": RebalanceDrain, "checkpoint": RebalanceCheckpoint}
	shardings         = map[string]Sharding{
		"ddp": ShardingReplicated, "none": ShardingReplicated, "no": ShardingReplicated, "replicated": ShardingReplicated, "zero0": ShardingReplicated,
		"zero1": ShardingZeRO1, "zero-1": ShardingZeRO1,
		"zero2": ShardingZeRO2, "zero-2": ShardingZeRO2, "shard_grad_op": ShardingZeRO2,
		"zero3": ShardingZeRO3, "zero-3": ShardingZeRO3, "fsdp": ShardingZeRO3, "full_shard": ShardingZeRO3, "sharded": ShardingZeRO3,
	}
	capacities = map[string]capacity.Type{"spot": capacity.Spot, "on-demand": capacity.OnDemand, "ondemand": capacity.OnDemand, "on_demand": capacity.OnDemand}
)

// oneOf sets *dst to the value val names in names.
func oneOf[T any](key, val string, names map[string]T, dst *T, hint string) *MetadataError {
	v, ok := names[strings.ToLower(val)]
	if !ok {
		return bad(key, val, fmt.Sprintf("%s=%s is not known", key, val), hint)
	}
	*dst = v
	return nil
}

func (md *Metadata) set(key, val string) *MetadataError {
	if val == "" {
		return bad(key, val, "empty value", "give a value, e.g. "+key+"="+example(key))
	}
	s, ok := setters[key]
	if !ok {
		return &MetadataError{Key: key, Value: val, Msg: fmt.Sprintf("unknown key %q", key), Hint: "known keys: " + strings.Join(metadataKeys, ", ") + didYouMean(key)}
	}
	return s(md, key, val)
}

func bad(key, val, msg, hint string) *MetadataError {
	return &MetadataError{Key: key, Value: val, Msg: msg, Hint: hint}
}

// number is a value a bound applies to (bounds.go).
type number interface {
	~int | ~int64 | ~float64
}

// bounded parses val, refused as "key=val what" with hint when parse does
// not take it, then checks it against the key's bound.
func bounded[T number](key, val string, parse func(string) (T, bool), what, hint string) (T, *MetadataError) {
	v, ok := parse(val)
	if !ok {
		return 0, bad(key, val, fmt.Sprintf("%s=%s %s", key, val, what), hint)
	}
	b := float64(v)
	if d, isDur := any(v).(time.Duration); isDur {
		b = d.Seconds()
	}
	if e := checkBound(key, val, b); e != nil {
		return 0, e
	}
	return v, nil
}

// assign stores a parsed value in dst when it parsed.
func assign[T any](dst *T) func(T, *MetadataError) *MetadataError {
	return func(v T, e *MetadataError) *MetadataError {
		if e == nil {
			*dst = v
		}
		return e
	}
}

func count(s string) (float64, bool) {
	n, err := parseCount(s)
	return n, err == nil
}

func positiveCount(s string) (float64, bool) {
	n, err := parseCount(s)
	return n, err == nil && n > 0
}

func positiveBytes(s string) (float64, bool) {
	n, err := parseBytes(s)
	return n, err == nil && n > 0
}

func positiveFloat(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && f > 0 && !math.IsInf(f, 0) && !math.IsNaN(f)
}

func positiveDuration(s string) (time.Duration, bool) {
	d, err := parseDuration(s)
	return d, err == nil && d > 0
}

func anyDuration(s string) (time.Duration, bool) {
	d, err := parseDuration(s)
	return d, err == nil
}

func setCheckpoint(md *Metadata, key, val string) *MetadataError {
	switch strings.ToLower(val) {
	case "none", "no", "never", "off":
		md.NoCheckpoint = true
		return nil
	}
	return assign(&md.Checkpoint)(bounded(key, val, positiveDuration, "is not a checkpoint interval", "use a duration such as 30m, or checkpoint=none if the job cannot checkpoint"))
}

func setCheckpointSignal(md *Metadata, key, val string) *MetadataError {
	sig := strings.TrimPrefix(strings.ToUpper(val), "SIG")
	if !validSignals[sig] {
		return bad(key, val, fmt.Sprintf("checkpoint_signal=%s is not a signal burst can send", val), "use one of USR1, USR2, TERM, INT, HUP, CONT")
	}
	md.CheckpointSignal = sig
	return nil
}

func setWorkload(md *Metadata, key, val string) *MetadataError {
	w := Workload(strings.ToLower(val))
	var m Method
	switch w {
	case "fine-tune", "fine_tune", "sft":
		w = WorkloadFinetune
	case "training", "pretrain":
		w = WorkloadTrain
	case "infer", "serve", "serving":
		w = WorkloadInference
	case "lora", "peft":
		w, m = WorkloadFinetune, MethodLoRA
	case "qlora":
		w, m = WorkloadFinetune, MethodQLoRA
	}
	switch w {
	case WorkloadInference, WorkloadFinetune, WorkloadTrain:
	default:
		return bad(key, val, fmt.Sprintf("workload=%s is not known", val), "use inference, finetune, train, lora or qlora")
	}
	if m != MethodUnknown && md.Method != MethodUnknown && md.Method != m {
		return bad(key, val, fmt.Sprintf("workload=%s contradicts method=%s", val, md.Method), "give one of them")
	}
	md.Workload = w
	if m != MethodUnknown {
		md.Method = m
	}
	return nil
}

func setMethod(md *Metadata, key, val string) *MetadataError {
	m := Method(strings.ToLower(val))
	switch m {
	case "peft":
		m = MethodLoRA
	case "fft", "full-finetune":
		m = MethodFull
	}
	switch m {
	case MethodFull, MethodLoRA, MethodQLoRA:
	default:
		return bad(key, val, fmt.Sprintf("method=%s is not known", val), "use full, lora or qlora")
	}
	if md.Method != MethodUnknown && md.Method != m {
		return bad(key, val, fmt.Sprintf("method=%s contradicts workload=%s", val, md.Method), "give one of them")
	}
	md.Method = m
	return nil
}

// setTokenLen takes seq and context.
func setTokenLen(md *Metadata, key, val string) *MetadataError {
	n, err := parseTokenLen(val)
	if err != nil {
		return bad(key, val, fmt.Sprintf("%s=%s is not a sequence length", key, val), fmt.Sprintf("use a token count up to %dK, e.g. %s=4096 or %s=8K (K = 1024)", MaxTokenLen>>10, key, key))
	}
	if e := checkBound(key, val, float64(n)); e != nil {
		return e
	}
	if key == "seq" {
		md.Seq = n
	} else {
		md.Context = n
	}
	return nil
}

// setWhole takes the model-shape keys, whole numbers.
func setWhole(md *Metadata, key, val string) *MetadataError {
	n, err := strconv.Atoi(val)
	if err != nil {
		return bad(key, val, fmt.Sprintf("%s=%s is not a whole number", key, val), "e.g. "+key+"="+example(key))
	}
	if e := checkBound(key, val, float64(n)); e != nil {
		return e
	}
	*map[string]*int{"batch": &md.Batch, "layers": &md.Layers, "hidden": &md.Hidden, "heads": &md.Heads, "kv_heads": &md.KVHeads}[key] = n
	return nil
}

func setPrecision(md *Metadata, key, val string) *MetadataError {
	p := Precision(strings.ToLower(val))
	switch p {
	case "float32", "tf32":
		p = PrecisionFP32
	case "float16", "half":
		p = PrecisionFP16
	case "bfloat16":
		p = PrecisionBF16
	}
	if !slices.Contains(Precisions, p) {
		return bad(key, val, fmt.Sprintf("precision=%s is not known", val), "use fp32, bf16, fp16, fp8, int8 or int4")
	}
	md.Precision = p
	return nil
}

var validSignals = map[string]bool{"USR1": true, "USR2": true, "TERM": true, "INT": true, "HUP": true, "CONT": true}

func example(key string) string {
	switch key {
	case "params":
		return "7B"
	case "dataset":
		return "2TB"
	case "tokens":
		return "300B"
	case "epochs":
		return "3"
	case "deadline":
		return "8h"
	case "checkpoint":
		return "30m"
	case "workload":
		return "finetune"
	case "precision":
		return "bf16"
	case "capacity":
		return "spot"
	case "checkpoint_signal":
		return "USR1"
	case "checkpoint_to":
		return "steps"
	case "rebalance":
		return "checkpoint"
	case "method":
		return "lora"
	case "sharding":
		return "fsdp"
	case "seq", "context":
		return "4096"
	case "batch":
		return "8"
	case "layers":
		return "32"
	case "hidden":
		return "4096"
	case "heads", "kv_heads":
		return "8"
	case "latency":
		return "50ms"
	case "throughput":
		return "2000"
	}
	return "..."
}

// didYouMean proposes the closest known key for a misspelt one.
func didYouMean(key string) string {
	if best := suggest.Closest(key, metadataKeys); best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return ""
}
