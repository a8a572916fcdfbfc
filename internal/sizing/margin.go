package sizing

import (
	"fmt"

	"github.com/burst-hpc/burst/internal/jobmeta"
)

// The memory model's measured error, by kind of job: the largest amount
// by which its estimate exceeded a published measurement of the same
// setup (TestMemoryCalibration measures it on every published figure and
// fails if a constant here is below what it measures; sizer/README.md
// lists the figures). An explicit request (--gres/--gpus or --nodes) is
// refused only when the estimate exceeds the GPUs' whole
// memory by more than this: below it the model cannot tell that the job
// will not fit, and published runs show that such jobs do (the QLoRA
// paper's 65B on one 48 GB GPU is within 10% of the model's estimate), so
// the job is admitted with a warning that names the numbers.
//   - full fine-tune and training: +134%, GPT-3 175B (LoRA paper §4.2:
//     1.2 TB for the full fine-tune; ZeRO's 16 B per parameter give 2.8
//     TB: optimizer offload and 8-bit optimizers need less GPU memory
//     than the model assumes).
//   - LoRA and QLoRA: +10%, GPT-3 175B LoRA (LoRA paper §4.2: 350 GB).
//   - inference: 0%: the model reproduces the vLLM paper's figures (Kwon
//     et al. 2023: OPT-13B needs 800 KB of KV cache per token, a 13B
//     model has 26 GB of weights) exactly; an inference job is refused
//     only above the GPUs' whole memory.
const (
	MemoryErrorFull      = 1.34
	MemoryErrorAdapter   = 0.10
	MemoryErrorInference = 0
)

// MemoryError is the model's measured over-estimate for a job's kind
// (a fraction: 0.10 is +10%) and the publication it was measured on.
func (m Model) MemoryError() (float64, string) {
	switch {
	case !m.Training():
		return MemoryErrorInference, "vLLM (Kwon et al. 2023)"
	case m.Method == jobmeta.MethodLoRA || m.Method == jobmeta.MethodQLoRA:
		return MemoryErrorAdapter, "GPT-3 175B LoRA, LoRA paper (Hu et al. 2021)"
	}
	return MemoryErrorFull, "GPT-3 175B full fine-tune, LoRA paper (Hu et al. 2021)"
}

// tightNote is the warning of a plan admitted above the usable memory but
// within the model's measured error.
func tightNote(pl *plan, m *Model) string {
	e, src := m.MemoryError()
	fix := "a smaller seq= or batch=, or more GPUs"
	switch {
	case !m.Training():
		fix = "a shorter context=, a smaller batch=, or more GPUs"
	case m.Method != jobmeta.MethodQLoRA:
		fix = "a smaller seq= or batch=, more GPUs, or method=qlora"
	}
	return fmt.Sprintf("tight: the model predicts %.1f GiB per GPU, more than the %.1f GiB usable of each %s GPU (%.1f GiB, %.0f%% counted usable), but within the model's measured error (+%.0f%% against %s); admitted as you asked. If it runs out of GPU memory, use %s",
		pl.needMiB/1024, pl.usableMiB/1024, pl.class.GPUModel, float64(pl.memMiB)/1024, 100*pl.usableMiB/float64(pl.memMiB), 100*e, src, fix)
}
