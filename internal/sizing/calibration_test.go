package sizing

import (
	"fmt"
	"strings"
	"testing"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

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
