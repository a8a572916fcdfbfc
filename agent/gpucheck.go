package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/agent/gpu"
)

func gpuCheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "gpu-check",
		Usage: "print the GPUs NVML sees and one sample of each (exit 3 when there is no NVIDIA driver)",
		Action: func(c *cli.Context) error {
			r, err := gpu.Open()
			if errors.Is(err, gpu.ErrNoDriver) {
				return cli.Exit(fmt.Sprintf("no NVIDIA driver usable on this machine: %v\n(install the NVIDIA driver, or run the agent with --gpu-source sim)", err), 3)
			}
			if err != nil {
				return cli.Exit(fmt.Sprintf("reading GPUs: %v", err), 1)
			}
			defer r.Close()
			samples, err := r.Sample(c.Context)
			if err != nil {
				return cli.Exit(fmt.Sprintf("sampling GPUs: %v", err), 1)
			}
			w := c.App.Writer
			fmt.Fprintf(w, "%d GPU(s)\n", len(samples))
			for _, s := range samples {
				fmt.Fprintf(w, "GPU %d %s %s: util %d%%, memory %d/%d MiB, %.1f W, %d C, pids %v\n",
					s.Index, s.UUID, s.Name, s.UtilPercent, s.MemoryUsedBytes>>20, s.MemoryTotalBytes>>20, s.PowerWatts, s.TemperatureC, s.PIDs)
			}
			return nil
		},
	}
}
