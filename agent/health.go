package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/burst-hpc/burst/agent/gpu"
	"github.com/burst-hpc/burst/agent/healthwatch"
	"github.com/burst-hpc/burst/agent/spotwatch"
	"github.com/burst-hpc/burst/internal/catalog"
	"github.com/burst-hpc/burst/internal/gpuhealth"
	"github.com/burst-hpc/burst/internal/interruption"
	"github.com/burst-hpc/burst/internal/userdata"
)

// healthFlags are burst-agent run's GPU health flags.
func healthFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "gpu-health", EnvVars: []string{"BURST_GPU_HEALTH"}, Usage: "the GPU health monitor's settings as JSON (burst.yaml gpu_health, passed by the bootstrap): {\"off\":false,\"interval\":\"5s\",\"slowdown_after\":\"5m\",\"nvlink_errors\":100,\"xid\":{\"79\":\"replace\"},\"events\":{\"clock_slowdown\":\"note\"}}"},
		&cli.StringFlag{Name: "sim-fault-file", EnvVars: []string{"BURST_SIM_FAULT_FILE"}, Usage: "simulated GPUs only (--gpu-source sim): a root-owned JSON file of injected faults, read on every health pass (tests)"},
	}
}

// healthSettings reads --gpu-health, reporting every problem.
func healthSettings(s string) (userdata.GPUHealth, gpuhealth.Overrides, []error) {
	var g userdata.GPUHealth
	if strings.TrimSpace(s) == "" {
		return g, gpuhealth.Overrides{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return g, gpuhealth.Overrides{}, []error{fmt.Errorf("--gpu-health (BURST_GPU_HEALTH): %w", err)}
	}
	o, errs := gpuhealth.ParseOverrides(g.Xid, g.Events)
	for i, err := range errs {
		errs[i] = fmt.Errorf("--gpu-health (BURST_GPU_HEALTH) %w", err)
	}
	return g, o, errs
}

// healthDeps is what the monitor is built from in runAgent.
type healthDeps struct {
	reader       gpu.Reader
	ops          spotwatch.SlurmOps
	rec          healthwatch.Recorder
	node, id     string
	instanceType string
	log          *slog.Logger
}

// healthMonitor builds the GPU health monitor, or returns nil when it is
// off or the GPU source cannot report health.
func healthMonitor(c *cli.Context, d healthDeps) (*healthwatch.Monitor, error) {
	g, o, _ := healthSettings(c.String("gpu-health"))
	if g.Off {
		d.log.Warn("the GPU health monitor is off (gpu_health.off)")
		return nil, nil
	}
	gpus, ok := d.reader.(healthwatch.GPUs)
	if !ok {
		return nil, nil
	}
	ev, err := interruption.New(d.ops, interruption.Options{CheckpointRoot: c.String("checkpoint-root"), Signal: c.String("checkpoint-signal"),
		Grace: c.Duration("grace"), Reserve: c.Duration("reserve"), By: "agent", Logger: d.log})
	if err != nil {
		return nil, err
	}
	opts := healthwatch.Options{Node: d.node, InstanceID: d.id, Table: gpuhealth.NewTable(o), Wait: time.Duration(g.Interval),
		SlowdownAfter: time.Duration(g.SlowdownAfter), NVLinkErrors: g.NVLinkErrors, Logger: d.log,
		Jobs: func(ctx context.Context) ([]uint32, error) {
			js, err := d.ops.JobsOnNode(ctx, d.node)
			ids := make([]uint32, 0, len(js))
			for _, j := range js {
				ids = append(ids, j.ID)
			}
			return ids, err
		}}
	if t, ok := catalog.Default().Lookup(d.instanceType); ok && t.GPUs > 0 {
		opts.ExpectGPUs, opts.ExpectModel = t.GPUs, t.GPUModel
	}
	return healthwatch.New(gpus, ev, d.rec, opts)
}

// simName is the simulated GPUs' model name for an instance type's GPU
// model, so that the class check sees the model the class has.
func simName(model string) string {
	if model == "" {
		return ""
	}
	return "Simulated NVIDIA " + strings.ToUpper(model)
}
