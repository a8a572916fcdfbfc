package cmd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/internal/slurm"
)

// parseGresGPUs returns the GPU type and count of a --gres value such as
// "gpu:a100:8", "gres:gpu:2" or "gres:gpu:a10g:1,gres:nvme:1".
func parseGresGPUs(s string) (model string, count int, err error) {
	list, err := slurm.ParseGRES(s)
	if err != nil {
		return "", 0, err
	}
	for _, g := range list {
		if g.Name == "gpu" {
			if g.Type != "" {
				model = g.Type
			}
			if g.Count > maxCount || count+int(g.Count) > maxCount {
				return "", 0, fmt.Errorf("GPU count in %q is implausibly large", s)
			}
			count += int(g.Count)
		}
	}
	return model, count, nil
}

// maxCount bounds GPU and node counts read from options.
const maxCount = 1 << 20

// parseGPUSpec parses --gpus / --gpus-per-node values: "4", "a100:4",
// "gpu:a100:4", "gres:gpu:4".
func parseGPUSpec(s string) (model string, count int, err error) {
	fields := strings.Split(strings.TrimSpace(s), ":")
	var rest []string
	for _, f := range fields {
		if f != "gres" && f != "gpu" && f != "" {
			rest = append(rest, f)
		}
	}
	switch len(rest) {
	case 1:
		if n, err := strconv.Atoi(rest[0]); err == nil && n >= 0 && n <= maxCount {
			return "", n, nil
		} else if err == nil {
			return "", 0, fmt.Errorf("GPU count %q is out of range", rest[0])
		}
		return rest[0], 1, nil
	case 2:
		n, err := strconv.Atoi(rest[1])
		if err != nil || n < 0 || n > maxCount {
			return "", 0, fmt.Errorf("GPU count %q in %q is not a number", rest[1], s)
		}
		return rest[0], n, nil
	}
	return "", 0, fmt.Errorf("cannot read GPUs from %q; want N, TYPE:N or gpu:TYPE:N", s)
}

// parseNodes reads --nodes "2" or "2-4" (the minimum counts).
func parseNodes(s string) (int, error) {
	lo, _, _ := strings.Cut(strings.TrimSpace(s), "-")
	n, err := strconv.Atoi(lo)
	if err != nil || n < 0 || n > maxCount {
		return 0, fmt.Errorf("--nodes=%q is not a node count", s)
	}
	return n, nil
}

// parseSlurmTime reads a Slurm time limit: minutes, minutes:seconds,
// hours:minutes:seconds, days-hours, days-hours:minutes,
// days-hours:minutes:seconds; "UNLIMITED", "INFINITE", "unset" and Slurm's
// formatted NO_VAL give 0.
func parseSlurmTime(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "", "unlimited", "infinite", "unset",
		// cli_filter reports an unset --time as Slurm's NO_VAL (and
		// INFINITE) minutes, formatted: 2982616-04:14:00 (04:15:00).
		"2982616-04:14:00", "2982616-04:15:00":
		return 0, nil
	}
	d, ok := slurm.ParseTimeLimit(s)
	if !ok {
		return 0, fmt.Errorf("--time=%q is not a Slurm time (minutes, HH:MM:SS or D-HH:MM:SS)", s)
	}
	return d, nil
}

// parseMemMiB reads --mem: a number of MiB with optional K, M, G, T suffix.
func parseMemMiB(s string) (int, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	mult := 1.0
	if s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult, s = 1.0/1024, s[:len(s)-1]
		case 'M':
			s = s[:len(s)-1]
		case 'G':
			mult, s = 1024, s[:len(s)-1]
		case 'T':
			mult, s = 1024*1024, s[:len(s)-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f*mult > 1<<40 {
		return 0, fmt.Errorf("--mem=%q is not a memory size", s)
	}
	return int(f * mult), nil
}
