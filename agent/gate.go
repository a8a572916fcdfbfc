package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/burst-hpc/burst/agent/gpu"
	"github.com/burst-hpc/burst/agent/gpu/sim"
	"github.com/burst-hpc/burst/agent/healthwatch"
	"github.com/burst-hpc/burst/internal/bootstrap"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/gpuhealth"
)

// gpuGate is the bootstrap's GPU gate (internal/bootstrap StepGPUGate):
// before slurmd registers, the GPUs must be as many and of the model the
// instance type has, NVML must read them without a fault the table says
// to replace the node for, and, when gpu_health.dcgm_level is set on real
// GPUs, `dcgmi diag -r <level>` must pass within gpu_health.dcgm_timeout.
// The error is the node's reason ("gpu: gpu_count (7 GPUs, the class has
// 8)"); the bootstrap hands the node back with it.
func gpuGate(log *slog.Logger, dcgmi string) bootstrap.GPUGate {
	return func(ctx context.Context, in bootstrap.GateInput) error {
		t, known := catalog.Default().Lookup(in.InstanceType)
		if !known || t.GPUs == 0 {
			log.Info("GPU gate: the instance type has no GPUs in the catalog; nothing to check", "instance_type", in.InstanceType)
			return nil
		}
		var r healthwatch.GPUs
		if in.GPUSource == "sim" {
			s, err := sim.New(sim.Options{GPUs: t.GPUs, MemoryTotalBytes: uint64(t.GPUMemoryMiB) << 20, Name: simName(t.GPUModel),
				FaultFile: in.SimFaultFile, InstanceID: in.InstanceID})
			if err != nil {
				return err
			}
			r = s
		} else {
			n, err := gpu.Open()
			if err != nil {
				return fmt.Errorf("gpu: NVML cannot read the GPUs: %w", err)
			}
			defer n.Close()
			r = n
		}
		o := healthwatch.Options{ExpectGPUs: t.GPUs, ExpectModel: t.GPUModel, Logger: log}
		var level int
		var dcgmTimeout time.Duration
		if h := in.Health; h != nil {
			ov, errs := gpuhealth.ParseOverrides(h.Xid, h.Events)
			if len(errs) > 0 {
				return fmt.Errorf("gpu_health in the user data: %w", errors.Join(errs...))
			}
			o.Table = gpuhealth.NewTable(ov)
			level, dcgmTimeout = h.DCGMLevel, time.Duration(h.DCGMTimeout)
		}
		bad, ok, err := healthwatch.Gate(ctx, r, o, time.Second)
		if err != nil {
			return fmt.Errorf("gpu: reading GPU health: %w", err)
		}
		if !ok {
			log.Error("GPU gate failed: handing the node back", "event", bad.What(), "gpu", bad.GPU, "detail", bad.Detail)
			return errors.New(bad.Reason())
		}
		if level > 0 && in.GPUSource != "sim" {
			if err := runDCGM(ctx, dcgmi, level, dcgmTimeout); err != nil {
				return err
			}
		}
		log.Info("GPU gate passed", "gpus", t.GPUs, "model", t.GPUModel, "dcgm_level", level)
		return nil
	}
}

// runDCGM runs `dcgmi diag -r level`, bounded by timeout (default 2 min).
func runDCGM(ctx context.Context, dcgmi string, level int, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	if _, err := exec.LookPath(dcgmi); err != nil {
		return fmt.Errorf("gpu: gpu_health.dcgm_level %d but %s is not installed (install datacenter-gpu-manager in the image, or set dcgm_level: 0): %w", level, dcgmi, err)
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(dctx, dcgmi, "diag", "-r", strconv.Itoa(level))
	cmd.WaitDelay = 2 * time.Second // a child holding the output open does not hold the gate
	out, err := cmd.CombinedOutput()
	if dctx.Err() != nil {
		return fmt.Errorf("gpu: dcgmi diag -r %d did not finish within %s", level, timeout)
	}
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		last := lines[len(lines)-1]
		for _, l := range lines {
			if strings.Contains(l, "Fail") {
				last = strings.TrimSpace(l)
				break
			}
		}
		return fmt.Errorf("gpu: dcgmi diag -r %d failed: %s", level, last)
	}
	return nil
}
