package bootstrap

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/burst-hpc/burst/internal/userdata"
)

func TestGPUGateStep(t *testing.T) {
	ctx := context.Background()
	b := &boot{o: Options{RunDir: "/run/burst"}, log: slog.New(slog.DiscardHandler)}
	if skipped, err := b.gpuGate(ctx); skipped == "" || err != nil {
		t.Errorf("no gate: %q %v", skipped, err)
	}
	var got GateInput
	b.o.GPUGate = func(_ context.Context, in GateInput) error {
		got = in
		return errors.New("gpu: gpu_count (7 GPUs, the class has 8)")
	}
	b.ud.Agent.GPUSource, b.instance = "sim", Instance{ID: "i-0abc", Type: "p5.48xlarge"}
	if _, err := b.gpuGate(ctx); err == nil || FailureReason(StepGPUGate, err) != "burst bootstrap: gpu-gate: gpu: gpu_count (7 GPUs, the class has 8)" {
		t.Errorf("failing gate: %v", err)
	}
	if got.InstanceID != "i-0abc" || got.InstanceType != "p5.48xlarge" || got.SimFaultFile != "/run/burst/"+SimFaultFileName {
		t.Errorf("gate input %+v", got)
	}
	// a gate that hangs fails within its timeout
	b.o.GateTimeout = 50 * time.Millisecond
	b.o.GPUGate = func(ctx context.Context, in GateInput) error { select {} }
	t0 := time.Now()
	if _, err := b.gpuGate(ctx); err == nil || !strings.Contains(err.Error(), "did not finish within 50ms") || time.Since(t0) > 10*time.Second {
		t.Errorf("hung gate: %v after %v", err, time.Since(t0))
	}
	b.ud.Agent.GPUHealth = &userdata.GPUHealth{Off: true}
	if skipped, err := b.gpuGate(ctx); skipped != "gpu_health.off" || err != nil {
		t.Errorf("gate off: %q %v", skipped, err)
	}
}

func TestGPUHealthEnv(t *testing.T) {
	u := userdata.UserData{Agent: userdata.Agent{GPUSource: "sim", GPUHealth: &userdata.GPUHealth{Xid: map[string]string{"13": "replace"}}}}
	env := AgentEnv(u, "/run/burst/agent.credential", "/run/burst/ca.pem", "/n")
	want := []string{`BURST_GPU_HEALTH={"xid":{"13":"replace"}}`, "BURST_SIM_FAULT_FILE=/run/burst/" + SimFaultFileName}
	for _, w := range want {
		found := false
		for _, e := range env {
			found = found || e == w
		}
		if !found {
			t.Errorf("agent env %q lacks %s", env, w)
		}
	}
	u.Agent.GPUSource, u.Agent.GPUHealth = "nvml", nil
	for _, e := range AgentEnv(u, "/run/burst/agent.credential", "", "") {
		if strings.HasPrefix(e, "BURST_SIM_FAULT_FILE=") || strings.HasPrefix(e, "BURST_GPU_HEALTH=") {
			t.Errorf("real GPUs got %s", e)
		}
	}
}
