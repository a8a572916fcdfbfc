package sizing

import (
	"fmt"
	"math"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// Arch is the shape of a decoder-only transformer: what the activation and
// KV-cache terms of the memory model need beyond the parameter count.
type Arch struct {
	Name    string
	Params  float64
	Layers  int
	Hidden  int
	Heads   int
	KVHeads int // < Heads with grouped-query attention
	Vocab   int
	Source  string
}

// HeadDim is Hidden / Heads.
func (a Arch) HeadDim() int {
	if a.Heads == 0 {
		return 0
	}
	return a.Hidden / a.Heads
}

// knownArchs are published architectures, each from its model's config.json
// on the Hugging Face Hub (num_hidden_layers, hidden_size,
// num_attention_heads, num_key_value_heads, vocab_size) or its paper. A job
// that gives params= but not its shape is sized with the nearest known size.
var knownArchs = []Arch{
	{"GPT-2 (124M)", 124e6, 12, 768, 12, 12, 50257, "openai-community/gpt2 config.json"},
	{"Llama 3.2 1B", 1.24e9, 16, 2048, 32, 8, 128256, "meta-llama/Llama-3.2-1B config.json"},
	{"GPT-2 XL (1.5B)", 1.56e9, 48, 1600, 25, 25, 50257, "openai-community/gpt2-xl config.json"},
	{"Llama 3.2 3B", 3.21e9, 28, 3072, 24, 8, 128256, "meta-llama/Llama-3.2-3B config.json"},
	{"Llama 2 7B", 6.74e9, 32, 4096, 32, 32, 32000, "meta-llama/Llama-2-7b-hf config.json"},
	{"Llama 3.1 8B", 8.03e9, 32, 4096, 32, 8, 128256, "meta-llama/Llama-3.1-8B config.json"},
	{"Llama 2 13B", 13.0e9, 40, 5120, 40, 40, 32000, "meta-llama/Llama-2-13b-hf config.json"},
	{"LLaMA 33B", 32.5e9, 60, 6656, 52, 52, 32000, "LLaMA paper (Touvron et al. 2023), Table 2"},
	{"LLaMA 65B", 65.2e9, 80, 8192, 64, 64, 32000, "LLaMA paper (Touvron et al. 2023), Table 2"},
	{"Llama 3.1 70B", 70.6e9, 80, 8192, 64, 8, 128256, "meta-llama/Llama-3.1-70B config.json"},
	{"GPT-3 / OPT 175B", 175e9, 96, 12288, 96, 96, 50272, "OPT paper (Zhang et al. 2022), Table 1; GPT-3 paper (Brown et al. 2020), Table 2.1"},
	{"BLOOM 176B", 176e9, 70, 14336, 112, 112, 250880, "bigscience/bloom config.json"},
	{"Llama 3.1 405B", 405e9, 126, 16384, 128, 8, 128256, "meta-llama/Llama-3.1-405B config.json"},
}

// ArchFor is the architecture the memory model uses for a job: the known
// architecture nearest in parameter count (by ratio), with any of layers=,
// hidden=, heads=, kv_heads= the job gave replacing the table's. note says
// what was assumed ("" when the job gave the whole shape).
func ArchFor(md jobmeta.Metadata) (Arch, string) {
	best := knownArchs[0]
	bd := math.Inf(1)
	for _, a := range knownArchs {
		if d := math.Abs(math.Log(md.Params / a.Params)); d < bd {
			best, bd = a, d
		}
	}
	a := best
	a.Params = md.Params
	given := 0
	if md.Layers > 0 {
		a.Layers, given = md.Layers, given+1
	}
	if md.Hidden > 0 {
		a.Hidden, given = md.Hidden, given+1
	}
	if md.Heads > 0 {
		a.Heads, given = md.Heads, given+1
		if md.KVHeads == 0 && a.KVHeads > a.Heads {
			a.KVHeads = a.Heads
		}
	}
	if md.KVHeads > 0 {
		a.KVHeads, given = md.KVHeads, given+1
	}
	if md.Heads > 0 && md.KVHeads == 0 {
		a.KVHeads = a.Heads // no grouped-query attention unless kv_heads= says so
	}
	if a.KVHeads > a.Heads {
		a.KVHeads = a.Heads
	}
	if given == 4 {
		a.Name = "as given"
		return a, ""
	}
	return a, fmt.Sprintf("shape of %s assumed (nearest known size; %s); give layers= hidden= heads= kv_heads= to override", best.Name, best.Source)
}
