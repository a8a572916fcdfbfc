package jobmeta

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/burst-hpc/burst/internal/capacity"
	"github.com/burst-hpc/burst/internal/suggest"
)

func (md *Metadata) set(key, val string) *MetadataError {
	bad := func(msg, hint string) *MetadataError {
		return &MetadataError{Key: key, Value: val, Msg: msg, Hint: hint}
	}
	if val == "" {
		return bad("empty value", "give a value, e.g. "+key+"="+example(key))
	}
	switch key {
	case "params":
		n, err := parseCount(val)
		if err != nil || n <= 0 {
			return bad(fmt.Sprintf("params=%s is not a parameter count", val), "use a number with optional K, M, B or T, e.g. params=7B")
		}
		if e := checkBound(key, val, n); e != nil {
			return e
		}
		md.Params = n
	case "tokens":
		n, err := parseCount(val)
		if err != nil || n <= 0 {
			return bad(fmt.Sprintf("tokens=%s is not a token count", val), "use a number with optional K, M, B or T, e.g. tokens=300B")
		}
		if e := checkBound(key, val, n); e != nil {
			return e
		}
		md.Tokens = n
	case "dataset":
		n, err := parseBytes(val)
		if err != nil || n <= 0 {
			return bad(fmt.Sprintf("dataset=%s is not a size", val), "use a size such as 500GB, 2TB or 800GiB")
		}
		if e := checkBound(key, val, n); e != nil {
			return e
		}
		md.DatasetBytes = n
	case "epochs":
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return bad(fmt.Sprintf("epochs=%s is not a positive number", val), "e.g. epochs=3")
		}
		if e := checkBound(key, val, f); e != nil {
			return e
		}
		md.Epochs = f
	case "deadline":
		d, err := parseDuration(val)
		if err != nil || d <= 0 {
			return bad(fmt.Sprintf("deadline=%s is not a duration", val), "use a duration such as 8h, 90m, 2d or 1h30m")
		}
		if e := checkBound(key, val, d.Seconds()); e != nil {
			return e
		}
		md.Deadline = d
	case "checkpoint":
		switch strings.ToLower(val) {
		case "none", "no", "never", "off":
			md.NoCheckpoint = true
			return nil
		}
		d, err := parseDuration(val)
		if err != nil || d <= 0 {
			return bad(fmt.Sprintf("checkpoint=%s is not a checkpoint interval", val), "use a duration such as 30m, or checkpoint=none if the job cannot checkpoint")
		}
		if e := checkBound(key, val, d.Seconds()); e != nil {
			return e
		}
		md.Checkpoint = d
	case "checkpoint_signal":
		sig := strings.TrimPrefix(strings.ToUpper(val), "SIG")
		if !validSignals[sig] {
			return bad(fmt.Sprintf("checkpoint_signal=%s is not a signal burst can send", val), "use one of USR1, USR2, TERM, INT, HUP, CONT")
		}
		md.CheckpointSignal = sig
	case "checkpoint_to":
		switch strings.ToLower(val) {
		case "batch":
			md.CheckpointTo = CheckpointToBatch
		case "steps":
			md.CheckpointTo = CheckpointToSteps
		default:
			return bad(fmt.Sprintf("checkpoint_to=%s is not known", val), "use checkpoint_to=batch (the batch shell, the default) or checkpoint_to=steps (every process of every step)")
		}
	case "rebalance":
		switch strings.ToLower(val) {
		case "drain", "none":
			md.Rebalance = RebalanceDrain
		case "checkpoint":
			md.Rebalance = RebalanceCheckpoint
		default:
			return bad(fmt.Sprintf("rebalance=%s is not known", val), "use rebalance=drain (the default) or rebalance=checkpoint (an early checkpoint: SIGUSR2 to the batch shell)")
		}
	case "workload":
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
			return bad(fmt.Sprintf("workload=%s is not known", val), "use inference, finetune, train, lora or qlora")
		}
		if m != MethodUnknown && md.Method != MethodUnknown && md.Method != m {
			return bad(fmt.Sprintf("workload=%s contradicts method=%s", val, md.Method), "give one of them")
		}
		md.Workload = w
		if m != MethodUnknown {
			md.Method = m
		}
	case "method":
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
			return bad(fmt.Sprintf("method=%s is not known", val), "use full, lora or qlora")
		}
		if md.Method != MethodUnknown && md.Method != m {
			return bad(fmt.Sprintf("method=%s contradicts workload=%s", val, md.Method), "give one of them")
		}
		md.Method = m
	case "sharding":
		sh := Sharding(strings.ToLower(val))
		switch sh {
		case "ddp", "none", "no", "replicated", "zero0":
			sh = ShardingReplicated
		case "fsdp", "full_shard", "sharded", "zero-3":
			sh = ShardingZeRO3
		case "zero-2", "shard_grad_op":
			sh = ShardingZeRO2
		case "zero-1":
			sh = ShardingZeRO1
		}
		switch sh {
		case ShardingReplicated, ShardingZeRO1, ShardingZeRO2, ShardingZeRO3:
			md.Sharding = sh
		default:
			return bad(fmt.Sprintf("sharding=%s is not known", val), "use ddp (replicated), zero1, zero2, zero3 or fsdp")
		}
	case "seq", "context":
		n, err := parseTokenLen(val)
		if err != nil {
			return bad(fmt.Sprintf("%s=%s is not a sequence length", key, val), fmt.Sprintf("use a token count up to %dK, e.g. %s=4096 or %s=8K (K = 1024)", MaxTokenLen>>10, key, key))
		}
		if e := checkBound(key, val, float64(n)); e != nil {
			return e
		}
		if key == "seq" {
			md.Seq = n
		} else {
			md.Context = n
		}
	case "batch", "layers", "hidden", "heads", "kv_heads":
		n, err := strconv.Atoi(val)
		if err != nil {
			return bad(fmt.Sprintf("%s=%s is not a whole number", key, val), "e.g. "+key+"="+example(key))
		}
		if e := checkBound(key, val, float64(n)); e != nil {
			return e
		}
		switch key {
		case "batch":
			md.Batch = n
		case "layers":
			md.Layers = n
		case "hidden":
			md.Hidden = n
		case "heads":
			md.Heads = n
		case "kv_heads":
			md.KVHeads = n
		}
	case "latency":
		d, err := parseDuration(val)
		if err != nil {
			return bad(fmt.Sprintf("latency=%s is not a per-token latency", val), "use a duration such as 50ms or 0.1s")
		}
		if e := checkBound(key, val, d.Seconds()); e != nil {
			return e
		}
		md.Latency = d
	case "throughput":
		n, err := parseCount(strings.TrimSuffix(strings.ToLower(val), "/s"))
		if err != nil {
			return bad(fmt.Sprintf("throughput=%s is not a token rate", val), "use tokens per second, e.g. throughput=2000 or throughput=2K")
		}
		if e := checkBound(key, val, n); e != nil {
			return e
		}
		md.Throughput = n
	case "precision":
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
			return bad(fmt.Sprintf("precision=%s is not known", val), "use fp32, bf16, fp16, fp8, int8 or int4")
		}
		md.Precision = p
	case "capacity":
		switch c := capacity.Type(strings.ToLower(val)); c {
		case capacity.Spot, capacity.OnDemand:
			md.Capacity = c
		case "ondemand", "on_demand":
			md.Capacity = capacity.OnDemand
		default:
			return bad(fmt.Sprintf("capacity=%s is not known", val), "use capacity=spot or capacity=on-demand")
		}
	default:
		return &MetadataError{Key: key, Value: val, Msg: fmt.Sprintf("unknown key %q", key), Hint: "known keys: " + strings.Join(metadataKeys, ", ") + didYouMean(key)}
	}
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
