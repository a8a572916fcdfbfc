package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/burst-hpc/burst/internal/userdata"
)

// StepGPUGate checks the node's GPUs before slurmd registers.
const StepGPUGate = "gpu-gate"

const (
	// EnvGPUHealth carries burst.yaml's gpu_health to burst-agent run as
	// JSON (userdata.GPUHealth).
	EnvGPUHealth = "BURST_GPU_HEALTH"
	// EnvSimFaultFile is the simulated GPUs' fault injection file (sim only).
	EnvSimFaultFile = "BURST_SIM_FAULT_FILE"
	// SimFaultFileName is that file in the run directory, beside the
	// credential (root-owned: only root can inject; agent/gpu/sim).
	SimFaultFileName = "sim-gpu-faults.json"
)

// gpuHealthEnv is the agent's GPU health environment: the settings, and
// the fault file in the run directory (the credential's) for simulated GPUs.
func gpuHealthEnv(u userdata.UserData, credentialFile string) []string {
	var env []string
	if g := u.Agent.GPUHealth; g != nil {
		if b, err := json.Marshal(g); err == nil {
			env = append(env, EnvGPUHealth+"="+string(b))
		}
	}
	if u.Agent.GPUSource == "sim" {
		env = append(env, EnvSimFaultFile+"="+filepath.Join(filepath.Dir(credentialFile), SimFaultFileName))
	}
	return env
}

// GateInput is what the GPU gate knows of the instance.
type GateInput struct {
	InstanceID, InstanceType string
	// GPUSource is the user data's: nvml or sim.
	GPUSource string
	// SimFaultFile is the simulated GPUs' fault file (sim only).
	SimFaultFile string
	// Health is burst.yaml's gpu_health (nil: the defaults).
	Health *userdata.GPUHealth
}

// GPUGate checks the GPUs (burst-agent's: count and model against the
// instance type, NVML health, optionally dcgmi diag). A non-nil error is
// why the node must not run jobs: the bootstrap hands it back with it as
// the reason, so the instance is terminated and the job launched elsewhere.
type GPUGate func(ctx context.Context, in GateInput) error

// DefaultGateTimeout bounds the whole gate (NVML calls and dcgmi can hang
// on a bad GPU).
const DefaultGateTimeout = 3 * time.Minute

func (b *boot) gpuGate(ctx context.Context) (string, error) {
	if b.o.GPUGate == nil {
		return "no GPU gate configured", nil
	}
	if h := b.ud.Agent.GPUHealth; h != nil && h.Off {
		return "gpu_health.off", nil
	}
	limit := b.o.GateTimeout
	if limit <= 0 {
		limit = DefaultGateTimeout
	}
	gctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	in := GateInput{InstanceID: b.instance.ID, InstanceType: b.instance.Type, GPUSource: b.ud.Agent.GPUSource, Health: b.ud.Agent.GPUHealth}
	if in.GPUSource == "sim" {
		in.SimFaultFile = filepath.Join(b.o.RunDir, SimFaultFileName)
	}
	done := make(chan error, 1)
	go func() { done <- b.o.GPUGate(gctx, in) }()
	select {
	case err := <-done:
		return "", err
	case <-gctx.Done():
		if errors.Is(gctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("gpu: the GPU checks did not finish within %s (a hung GPU or driver)", limit)
		}
		return "", gctx.Err()
	}
}
