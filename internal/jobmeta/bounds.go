package jobmeta

import (
	"fmt"
	"strconv"
	"time"
)

// Bound is the range a numeric metadata key accepts, and why. A value
// outside it is refused with the key, the value, the bound and the reason,
// so that a typo (epochs=1e9, params=7T for 7B) cannot turn into an
// estimate of billions of dollars.
type Bound struct {
	Key      string
	Min, Max float64 // in the key's unit (parameters, tokens, bytes, seconds, ...)
	Unit     string  // how Min and Max are printed: "count", "bytes", "duration", "int"
	Why      string
}

// Bounds of every numeric key. The upper bounds are one to two orders of
// magnitude above the largest published runs, so that no real job is
// refused while a slip of the exponent is:
//   - params: the largest published dense model trained to completion is
//     Llama 3.1 405B (Meta 2024); mixture-of-experts models reach about 2T
//     parameters (Switch Transformer C, Fedus et al. 2022: 1.6T). 100T is
//     50 times that.
//   - tokens, and tokens x epochs: Llama 3 trained on 15.6T tokens (Meta
//     2024), the largest published corpus; 1P (10^15) is 64 times that.
//   - dataset: 4 PB is 1P tokens at BytesPerToken.
//   - epochs: fine-tunes run 1-10 epochs and small-data runs a few hundred;
//     10,000 is far above both.
//   - deadline and checkpoint: a year; no spot or on-demand run is planned
//     further ahead.
//   - batch: 65,536 sequences per GPU is far above any micro-batch (and any
//     inference engine's concurrent sequences; vLLM's default
//     max_num_seqs is 256).
//   - layers, hidden, heads, kv_heads: Llama 3.1 405B has 126 layers,
//     hidden 16,384 and 128 heads (its config.json); the bounds are about
//     10 times those.
//   - seq and context: MaxTokenLen (16M tokens; the longest published
//     context windows are 1-10M).
//   - latency: one hour per token; throughput: 10^12 tokens/s.
var Bounds = map[string]Bound{
	"params":     {"params", 1e3, 1e14, "count", "100T is 50x the largest published model (1.6-2T mixture of experts)"},
	"tokens":     {"tokens", 1, 1e15, "count", "1P tokens is 64x the largest published training corpus (Llama 3, 15.6T)"},
	"dataset":    {"dataset", 1, 4e15, "bytes", "4 PB is 1P tokens at 4 bytes per token"},
	"epochs":     {"epochs", 1e-6, 1e4, "count", "fine-tunes run 1-10 epochs, small-data runs a few hundred"},
	"deadline":   {"deadline", 1, 365 * 24 * 3600, "duration", "burst plans runs of up to a year"},
	"checkpoint": {"checkpoint", 1, 365 * 24 * 3600, "duration", "a checkpoint interval of up to a year"},
	"batch":      {"batch", 1, 1 << 16, "int", "65536 sequences per GPU is far above any micro-batch or serving batch"},
	"layers":     {"layers", 1, 1000, "int", "Llama 3.1 405B has 126 layers"},
	"hidden":     {"hidden", 1, 1 << 18, "int", "Llama 3.1 405B has hidden size 16384"},
	"heads":      {"heads", 1, 10000, "int", "Llama 3.1 405B has 128 heads"},
	"kv_heads":   {"kv_heads", 1, 10000, "int", "at most heads="},
	"seq":        {"seq", 1, MaxTokenLen, "int", "the longest published context windows are 1-10M tokens"},
	"context":    {"context", 1, MaxTokenLen, "int", "the longest published context windows are 1-10M tokens"},
	"latency":    {"latency", 1e-9, 3600, "duration", "a per-token latency of up to an hour"},
	"throughput": {"throughput", 1e-9, 1e12, "count", "10^12 tokens/s"},
}

// MaxTrainTokens bounds tokens (or dataset / BytesPerToken) times epochs:
// the tokens a job processes (see Bounds: tokens).
const MaxTrainTokens = 1e15

// format prints a value in the key's unit.
func (b Bound) format(v float64) string {
	switch b.Unit {
	case "duration":
		return time.Duration(v * float64(time.Second)).String()
	case "bytes":
		return formatCount(v) + "B"
	case "int":
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return formatCount(v)
}

// check refuses v outside the bound (nil when inside).
func (b Bound) check(val string, v float64) *MetadataError {
	if v >= b.Min && v <= b.Max {
		return nil
	}
	side, lim := "above the most", b.Max
	if v < b.Min {
		side, lim = "below the least", b.Min
	}
	return &MetadataError{Key: b.Key, Value: val,
		Msg:  fmt.Sprintf("%s=%s is %s burst accepts (%s)", b.Key, val, side, b.format(lim)),
		Hint: fmt.Sprintf("%s; check the value and its unit (e.g. %s=%s)", b.Why, b.Key, example(b.Key))}
}

// checkBound checks a parsed value against its key's bound.
func checkBound(key, val string, v float64) *MetadataError {
	b, ok := Bounds[key]
	if !ok {
		return nil
	}
	return b.check(val, v)
}

// formatCount prints 1e15 as 1P, 4e12 as 4T, 7e9 as 7B.
func formatCount(v float64) string {
	for _, u := range []struct {
		s string
		m float64
	}{{"P", 1e15}, {"T", 1e12}, {"B", 1e9}, {"M", 1e6}, {"K", 1e3}} {
		if v >= u.m {
			return strconv.FormatFloat(v/u.m, 'g', 4, 64) + u.s
		}
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
