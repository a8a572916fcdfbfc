package sizing

import (
	"fmt"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// Published training runs: GPU-hours, tokens and GPU type as their papers
// and model cards state them. sizer/README.md shows this table.
var publishedRuns = []struct {
	name    string
	params  float64
	tokens  float64
	gpu     string
	gpuH    float64
	derived bool // GPU-hours derived from a published throughput, not published themselves
	source  string
}{
	{"Llama 2 7B", 7e9, 2e12, "a100", 184320, false, "Llama 2 paper (Touvron et al. 2023) Table 2 and model card: A100-80GB"},
	{"Llama 2 13B", 13e9, 2e12, "a100", 368640, false, "same"},
	{"Llama 2 70B", 70e9, 2e12, "a100", 1720320, false, "same"},
	{"Llama 3 8B", 8e9, 15e12, "h100", 1.3e6, false, "Llama 3 model card (meta-llama/llama3 MODEL_CARD.md): H100-80GB, 15T+ tokens"},
	{"Llama 3 70B", 70e9, 15e12, "h100", 6.4e6, false, "same"},
	{"Llama 3.1 405B", 405e9, 15.6e12, "h100", 30.84e6, false, "Llama 3.1 model card (meta-llama/llama-models); 15.6T tokens from the Llama 3 paper (Meta 2024)"},
	{"BLOOM 176B", 176e9, 366e9, "a100", 1082990, false, "BLOOM paper (Le Scao et al. 2022): 1,082,990 compute hours on A100-80GB, 366B tokens"},
	{"OPT-175B", 175e9, 180e9, "a100", 6 * 175e9 * 180e9 / 147e12 / 3600, true, "OPT paper (Zhang et al. 2022): 180B tokens on 992 A100-80GB at 147 TFLOP/s per GPU"},
	{"MPT-7B", 6.7e9, 1e12, "a100", 440 * 9.5 * 24, false, "MosaicML MPT-7B model card and blog: 440 A100-40GB for 9.5 days, 1T tokens"},
}

// TestTimeCalibration checks the time model's arithmetic on the published
// runs (6ND at the assumed MFU, by hand) and prints the published-vs-
// estimated table. The estimate's error against the published figure is
// documentation, not a pass/fail bound.
func TestTimeCalibration(t *testing.T) {
	var b strings.Builder
	b.WriteString("| run | GPU | published GPU-h | estimate (6ND / peak x MFU) | error | with scale-out factor 0.95 | error |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range publishedRuns {
		peak := map[string]float64{"a100": 312e12, "h100": 989e12}[r.gpu]
		want := 6 * r.params * r.tokens / (peak * 0.40) / 3600
		got := ComputeHours(6*r.params*r.tokens, r.gpu, 1, 1)
		if !near(got, want) {
			t.Errorf("%s: %v h, want %v", r.name, got, want)
		}
		scaled := ComputeHours(6*r.params*r.tokens, r.gpu, 1, EFAFastEfficiency)
		pub := commas(r.gpuH)
		if r.derived {
			pub += " (derived)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %+.0f%% | %s | %+.0f%% |\n", r.name, strings.ToUpper(r.gpu), pub, commas(got), 100*(got/r.gpuH-1), commas(scaled), 100*(scaled/r.gpuH-1))
	}
	t.Logf("time calibration:\n%s", b.String())
}

// Published facts about what fits where. The model must agree with each
// (fits or not), and the table shows published against estimated.
func TestMemoryCalibration(t *testing.T) {
	const gb, gib = 1e9, float64(1 << 30)
	cases := []struct {
		fact      string
		meta      string
		gpus      int
		sh        jobmeta.Sharding
		gpuGiB    float64 // memory of each GPU of the published setup; 0: compare totals only
		fits      bool
		published float64 // bytes the source gives, 0 when it gives only the fit
		source    string
	}{
		{"GPT-2 1.5B, mixed-precision Adam: model states", "params=1.5B workload=train seq=1024", 1, jobmeta.ShardingReplicated, 0, true, 24 * gb, "ZeRO (Rajbhandari et al. 2020) §3.1: at least 24 GB"},
		{"LLaMA 65B, QLoRA, one 48 GB GPU", "params=65B workload=qlora seq=512", 1, jobmeta.ShardingReplicated, 48, true, 0, "QLoRA (Dettmers et al. 2023), abstract"},
		{"LLaMA 65B, regular 16-bit fine-tune", "params=65B workload=finetune seq=512", 1, jobmeta.ShardingReplicated, 0, true, 780 * gb, "QLoRA (Dettmers et al. 2023), §1: more than 780 GB"},
		{"GPT-3 175B, full fine-tune with Adam", "params=175B workload=finetune", 1, jobmeta.ShardingReplicated, 0, true, 1.2e12, "LoRA (Hu et al. 2021) §4.2: 1.2 TB"},
		{"GPT-3 175B, LoRA", "params=175B workload=lora", 1, jobmeta.ShardingReplicated, 0, true, 350 * gb, "LoRA (Hu et al. 2021) §4.2: 350 GB"},
		{"7B, mixed-precision AdamW, bytes per parameter x 7e9", "params=7B workload=finetune", 1, jobmeta.ShardingReplicated, 0, true, 18 * 7e9, "Hugging Face Transformers docs, model memory anatomy: 18 B/param (fp32 gradients and copy)"},
		{"Llama 2 70B inference, fp16, one 80 GB GPU", "params=70B workload=inference", 1, "", 80, false, 140 * gb, "Llama 2 release (Hugging Face blog, 2023): 140 GB of fp16 weights"},
		{"Llama 2 70B inference, fp16, two 80 GB GPUs", "params=70B workload=inference", 2, "", 80, true, 140 * gb, "same"},
		{"Llama 3.1 405B inference, bf16, one 8 x 80 GB node", "params=405B workload=inference", 8, "", 80, false, 810 * gb, "Llama 3 paper (Meta 2024) §6: 810 GB of bf16 weights exceed one 8 x H100 server"},
		{"Llama 3.1 405B inference, fp8, one 8 x 80 GB node", "params=405B workload=inference precision=fp8", 8, "", 80, true, 0, "Llama 3 paper (Meta 2024) §6.2: FP8 inference on a single 8 x H100 server"},
	}
	var b strings.Builder
	b.WriteString("| published | source | published | burst's estimate | error | fits? published / burst |\n| --- | --- | ---: | ---: | ---: | --- |\n")
	for _, c := range cases {
		m := newTestPolicy(t).needOf(Request{Metadata: md(t, "burst: "+c.meta)}).model
		mem := m.MemoryOn(c.gpus, c.sh)
		est := mem.Total()
		if strings.Contains(c.fact, "model states") {
			est -= mem.Activations * float64(c.gpus)
		}
		fits := true
		if c.gpuGiB > 0 {
			// burst counts 90% of each GPU (DefaultParams)
			fits = mem.PerGPU() <= c.gpuGiB*gib*DefaultParams().UsableGPUMemoryFraction
			if fits != c.fits {
				t.Errorf("%s: published fits=%v, burst says %v (%.1f GiB per GPU of %.0f)", c.fact, c.fits, fits, mem.PerGPU()/gib, c.gpuGiB)
			}
		}
		pub, errPct := "fits", "-"
		if c.published > 0 {
			pub = fmt.Sprintf("%.0f GB", c.published/gb)
			errPct = fmt.Sprintf("%+.0f%%", 100*(est/c.published-1))
		}
		verdict := "-"
		if c.gpuGiB > 0 {
			verdict = fmt.Sprintf("%s / %s", yes(c.fits), yes(fits))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.0f GB (%.1f GiB per GPU) | %s | %s |\n", c.fact, c.source, pub, est/gb, mem.PerGPU()/gib, errPct, verdict)
	}
	t.Logf("memory calibration:\n%s", b.String())
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func commas(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
