package sizerapi

import (
	"fmt"
	"strings"
)

// Bounds on a JobRequest's numbers: beyond any GPU node or Slurm job
// burst sizes (a p5.48xlarge has 8 GPUs and 2 TiB; Slurm's MaxTime is
// at most a year here).
const (
	MaxGPUsPerNode      = 64
	MaxNodes            = 4096
	MaxCPUsPerNode      = 4096
	MaxMemoryMiBPerNode = 64 << 20 // 64 TiB
	MaxTimeLimitSeconds = 366 * 24 * 3600
)

// Validate reports every number of j that is negative or absurd, each as
// "<prefix>.<field>: ..." (prefix: where j sits in the request body, e.g.
// "job"); nil when all are in range.
func (j JobRequest) Validate(prefix string) error {
	var probs []string
	check := func(field string, v, max float64, unit string) {
		if v < 0 || v > max || v != v {
			probs = append(probs, fmt.Sprintf("%s.%s: %v is out of range: want 0 to %v%s", prefix, field, v, max, unit))
		}
	}
	check("gpus_per_node", float64(j.GPUsPerNode), MaxGPUsPerNode, "")
	check("nodes", float64(j.Nodes), MaxNodes, "")
	check("cpus_per_node", float64(j.CPUsPerNode), MaxCPUsPerNode, "")
	check("memory_mib_per_node", float64(j.MemoryMiBPerNode), MaxMemoryMiBPerNode, " MiB")
	check("time_limit_seconds", j.TimeLimitSeconds, MaxTimeLimitSeconds, " s (a year)")
	if len(probs) > 0 {
		return fmt.Errorf("%s", strings.Join(probs, "; "))
	}
	return nil
}
